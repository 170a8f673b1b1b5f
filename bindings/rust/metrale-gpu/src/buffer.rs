//! Device buffers: typed, freed on Drop, bounds-checked copies. Every call
//! that writes the buffer takes `&mut self`, so two threads can never write
//! one buffer at once, nor one write while another thread reads.

use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::shared::Shared;
use crate::util::Site;
use metrale_gpu_sys as sys;
use std::marker::PhantomData;
use std::sync::Arc;

/// Plain data that may be copied to and from the device byte for byte.
///
/// # Safety
/// Every bit pattern must be a valid value and the type must hold no
/// pointers or references (implement it only for `#[repr(C)]` structs of
/// `Pod` fields without padding).
pub unsafe trait Pod: Copy + Send + Sync + 'static {}

macro_rules! pod {
    ($($t:ty),*) => {$(unsafe impl Pod for $t {})*};
}
pod!(u8, u16, u32, u64, u128, usize, i8, i16, i32, i64, i128, isize, f32, f64);
unsafe impl<T: Pod, const N: usize> Pod for [T; N] {}

/// Which allocator a buffer came from, so Drop frees it the same way.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Origin {
    /// `metrale_alloc_at` / `metrale_alloc_managed_at`: on the ledger.
    Ledger,
    /// `metrale_alloc_arena`: off the ledger.
    Arena,
}

/// `len` elements of `T` in device memory. Dropping it frees it; it keeps
/// its context alive meanwhile.
///
/// Writes take `&mut self`: two threads cannot write one buffer at once.
///
/// ```compile_fail,E0499
/// # use metrale_gpu::{Backend, Context, ContextOptions};
/// let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
/// let (s1, s2) = (ctx.create_stream().unwrap(), ctx.create_stream().unwrap());
/// let mut buf = ctx.alloc::<u32>(1024).unwrap();
/// let (a, b) = (vec![1u32; 1024], vec![2u32; 1024]);
/// std::thread::scope(|t| {
///     t.spawn(|| buf.copy_from_host_async(&a, &s1).unwrap());
///     t.spawn(|| buf.copy_from_host_async(&b, &s2).unwrap()); // a second &mut: refused
/// });
/// ```
pub struct DeviceBuffer<T: Pod> {
    pub(crate) shared: Arc<Shared>,
    pub(crate) ptr: sys::metrale_devptr_t,
    len: usize,
    origin: Origin,
    _elem: PhantomData<T>,
}

// SAFETY: a device address and an Arc; the library is thread-safe, and
// writes need &mut.
unsafe impl<T: Pod> Send for DeviceBuffer<T> {}
unsafe impl<T: Pod> Sync for DeviceBuffer<T> {}

pub(crate) fn bytes_of<T>(len: usize) -> Result<usize> {
    len.checked_mul(std::mem::size_of::<T>())
        .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{len} elements overflow usize bytes")))
}

pub(crate) fn size_mismatch(what: &str, have: usize, want: usize) -> Error {
    Error::new(Status::InvalidArgument, format!("{what}: {have} elements given, the buffer holds {want}"))
}

impl<T: Pod> DeviceBuffer<T> {
    pub(crate) fn alloc(ctx: &Context, len: usize, managed: bool, site: Site) -> Result<Self> {
        let bytes = bytes_of::<T>(len)?;
        let shared = &ctx.shared;
        let ptr = shared.alloc_owned(|| {
            let mut ptr = 0;
            check(unsafe {
                if managed {
                    sys::metrale_alloc_managed_at(shared.raw(), bytes, site.file.as_ptr(), site.line, &mut ptr)
                } else {
                    sys::metrale_alloc_at(shared.raw(), bytes, site.file.as_ptr(), site.line, &mut ptr)
                }
            })?;
            Ok(ptr)
        })?;
        Ok(DeviceBuffer { shared: shared.clone(), ptr, len, origin: Origin::Ledger, _elem: PhantomData })
    }

    pub(crate) fn alloc_arena(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = bytes_of::<T>(len)?;
        let mut ptr = 0;
        ctx.call(|c| unsafe { sys::metrale_alloc_arena(c, bytes, &mut ptr) })?;
        Ok(DeviceBuffer { shared: ctx.shared.clone(), ptr, len, origin: Origin::Arena, _elem: PhantomData })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }
    /// True for a buffer of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    /// The size in bytes.
    pub fn bytes(&self) -> usize {
        self.len * std::mem::size_of::<T>()
    }
    /// The device address (a host address on the host backend).
    pub fn as_devptr(&self) -> sys::metrale_devptr_t {
        self.ptr
    }
    /// True for memory from [`Context::alloc_arena`] (not on the ledger).
    pub fn is_arena(&self) -> bool {
        self.origin == Origin::Arena
    }

    pub(crate) fn call(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> sys::metrale_status_t) -> Result<()> {
        check(f(self.shared.raw()))
    }

    /// Copies `src` to the start of the buffer; `src` may not be longer.
    pub fn copy_from_host(&mut self, src: &[T]) -> Result<()> {
        if src.len() > self.len {
            return Err(size_mismatch("copy_from_host", src.len(), self.len));
        }
        let bytes = std::mem::size_of_val(src);
        self.call(|c| unsafe { sys::metrale_copy_h2d(c, src.as_ptr().cast(), bytes, self.ptr) })
    }

    /// Copies the start of the buffer into `dst`; `dst` may not be longer.
    pub fn copy_to_host(&self, dst: &mut [T]) -> Result<()> {
        if dst.len() > self.len {
            return Err(size_mismatch("copy_to_host", dst.len(), self.len));
        }
        let bytes = std::mem::size_of_val(dst);
        self.call(|c| unsafe { sys::metrale_copy_d2h(c, self.ptr, dst.as_mut_ptr().cast(), bytes) })
    }

    /// The whole buffer as a Vec.
    pub fn to_vec(&self) -> Result<Vec<T>> {
        let mut v = Vec::<T>::with_capacity(self.len);
        let bytes = self.bytes();
        self.call(|c| unsafe { sys::metrale_copy_d2h(c, self.ptr, v.as_mut_ptr().cast(), bytes) })?;
        // SAFETY: the copy wrote all len elements; any bit pattern is a T.
        unsafe { v.set_len(self.len) };
        Ok(v)
    }

    /// Device-to-device copy of all of `src` to the start of this buffer.
    pub fn copy_from(&mut self, src: &DeviceBuffer<T>) -> Result<()> {
        Shared::same(&self.shared, &src.shared)?;
        if src.len > self.len {
            return Err(size_mismatch("copy_from", src.len, self.len));
        }
        self.call(|c| unsafe { sys::metrale_copy_d2d(c, src.ptr, self.ptr, src.bytes()) })
    }

    /// Sets every byte of the buffer to `value`.
    pub fn memset(&mut self, value: u8) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_memset(c, self.ptr, value, self.bytes()) })
    }

    fn release(&mut self) -> Result<()> {
        let ptr = std::mem::replace(&mut self.ptr, 0);
        let r = match self.origin {
            Origin::Ledger => self.call(|c| unsafe { sys::metrale_free(c, ptr) }),
            Origin::Arena => self.call(|c| unsafe { sys::metrale_free_arena(c, ptr) }),
        };
        if self.origin == Origin::Ledger {
            self.shared.release_owned();
        }
        r
    }

    /// Frees now and reports the library's status (Drop ignores it).
    pub fn free(mut self) -> Result<()> {
        self.release()
    }

    /// Gives the memory up without freeing it and returns its address: it
    /// stays on the ledger (a leak the context's destroy, or
    /// [`Context::sweep_unreleased`], frees and names by site). Freeing it
    /// is then the caller's business, through the sys crate.
    pub fn into_raw(mut self) -> sys::metrale_devptr_t {
        let ptr = std::mem::replace(&mut self.ptr, 0);
        if self.origin == Origin::Ledger {
            self.shared.release_owned();
        }
        ptr
    }
}

impl<T: Pod> Drop for DeviceBuffer<T> {
    fn drop(&mut self) {
        if self.ptr != 0 {
            let _ = self.release();
        }
    }
}

impl<T: Pod> std::fmt::Debug for DeviceBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "DeviceBuffer<{}>({:#x}, {} elements)", std::any::type_name::<T>(), self.ptr, self.len)
    }
}
