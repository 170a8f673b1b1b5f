//! Page-locked host memory, usable as a slice.

use crate::buffer::Pod;
use crate::context::Context;
use crate::error::{Error, Result, Status};
use metrale_gpu_sys as sys;

/// `len` zeroed elements of page-locked host memory, freed on Drop.
/// Dereferences to `[T]`. It borrows its context, so the context cannot be
/// closed while the slice is reachable.
pub struct PinnedHostBuffer<'ctx, T: Pod> {
    ctx: &'ctx Context,
    ptr: *mut T,
    len: usize,
}

// SAFETY: owned memory of Send + Sync elements; the library is thread-safe.
unsafe impl<T: Pod> Send for PinnedHostBuffer<'_, T> {}
unsafe impl<T: Pod> Sync for PinnedHostBuffer<'_, T> {}

impl<'ctx, T: Pod> PinnedHostBuffer<'ctx, T> {
    pub(crate) fn alloc(ctx: &'ctx Context, len: usize) -> Result<Self> {
        let bytes = len
            .checked_mul(std::mem::size_of::<T>())
            .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{len} elements overflow usize bytes")))?;
        let mut raw = std::ptr::null_mut();
        ctx.call(|c| unsafe { sys::metrale_host_alloc_pinned(c, bytes, &mut raw) })?;
        let ptr = raw.cast::<T>();
        if (ptr as usize) % std::mem::align_of::<T>() != 0 {
            let _ = ctx.call(|c| unsafe { sys::metrale_host_free_pinned(c, raw) });
            return Err(Error::new(Status::Internal, "pinned memory is not aligned for the element type"));
        }
        // SAFETY: bytes writable bytes; zero is a valid Pod value.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedHostBuffer { ctx, ptr, len })
    }

    /// The device address the library maps this memory to.
    pub fn device_pointer(&self) -> Result<sys::metrale_devptr_t> {
        let mut d = 0;
        self.ctx.call(|c| unsafe { sys::metrale_host_device_pointer(c, self.ptr.cast(), &mut d) })?;
        Ok(d)
    }

    /// Frees now and reports the library's status (Drop ignores it).
    pub fn free(self) -> Result<()> {
        let r = self.ctx.call(|c| unsafe { sys::metrale_host_free_pinned(c, self.ptr.cast()) });
        std::mem::forget(self);
        r
    }
}

impl<T: Pod> std::ops::Deref for PinnedHostBuffer<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        // SAFETY: len initialized elements, alive until Drop; the borrow of
        // the context keeps it from being closed meanwhile.
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }
}

impl<T: Pod> std::ops::DerefMut for PinnedHostBuffer<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

impl<T: Pod> Drop for PinnedHostBuffer<'_, T> {
    fn drop(&mut self) {
        let p = self.ptr.cast();
        let _ = self.ctx.call(|c| unsafe { sys::metrale_host_free_pinned(c, p) });
    }
}
