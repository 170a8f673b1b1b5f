//! Page-locked host memory.
//!
//! A device-to-host copy into it runs after the call returns
//! ([`DeviceBuffer::copy_to_pinned_async`]), so the buffer remembers the
//! event recorded after that copy, and every way to reach its bytes (the
//! slices, `free`, Drop) waits for it first. There is no `Deref` to a
//! slice: a plain `&[T]` could not wait.

use crate::buffer::{bytes_of, Pod};
use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::shared::Shared;
use crate::stream::Event;
use metrale_gpu_sys as sys;
use std::sync::{Arc, Mutex, PoisonError};

/// What the device may still do to the buffer.
pub(crate) enum Pending {
    /// Nothing: the bytes are the host's.
    Idle,
    /// An async copy writes it until this event completes.
    Copy(Event),
    /// A copy whose end can be neither recorded nor waited for: the bytes
    /// are never handed out, and the memory is leaked rather than freed.
    Lost(Error),
}

/// `len` zeroed elements of page-locked host memory, freed on Drop. It keeps
/// its context alive.
///
/// ```compile_fail,E0502
/// # use metrale_gpu::{Backend, Context, ContextOptions};
/// # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
/// # let s = ctx.create_stream().unwrap();
/// let buf = ctx.alloc_from(&[7u32; 16]).unwrap();
/// let mut pinned = ctx.alloc_pinned::<u32>(16).unwrap();
/// let early = pinned.as_slice().unwrap();
/// buf.copy_to_pinned_async(&mut pinned, &s).unwrap(); // the DMA writes it: no reader may hold it
/// println!("{}", early[0]);
/// ```
pub struct PinnedHostBuffer<T: Pod> {
    shared: Arc<Shared>,
    ptr: *mut T,
    len: usize,
    pending: Mutex<Pending>,
}

// SAFETY: owned memory of Send + Sync elements; the library is thread-safe;
// the bytes are reached only after the pending copy is waited for.
unsafe impl<T: Pod> Send for PinnedHostBuffer<T> {}
unsafe impl<T: Pod> Sync for PinnedHostBuffer<T> {}

impl<T: Pod> PinnedHostBuffer<T> {
    pub(crate) fn alloc(ctx: &Context, len: usize) -> Result<Self> {
        let bytes = bytes_of::<T>(len)?;
        let mut raw = std::ptr::null_mut();
        ctx.call(|c| unsafe { sys::metrale_host_alloc_pinned(c, bytes, &mut raw) })?;
        let ptr = raw.cast::<T>();
        if (ptr as usize) % std::mem::align_of::<T>() != 0 {
            let _ = ctx.call(|c| unsafe { sys::metrale_host_free_pinned(c, raw) });
            return Err(Error::new(Status::Internal, "pinned memory is not aligned for the element type"));
        }
        // SAFETY: bytes writable bytes; zero is a valid Pod value.
        unsafe { std::ptr::write_bytes(ptr, 0, len) };
        Ok(PinnedHostBuffer { shared: ctx.shared.clone(), ptr, len, pending: Mutex::new(Pending::Idle) })
    }

    /// The number of elements.
    pub fn len(&self) -> usize {
        self.len
    }

    /// True for a buffer of no elements.
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }

    /// The host address (for the sys crate; reading or writing through it
    /// while a copy is pending is the caller's race).
    pub fn as_ptr(&self) -> *const T {
        self.ptr
    }

    /// Waits for a pending device-to-host copy into the buffer.
    pub fn wait(&self) -> Result<()> {
        let mut pending = self.pending.lock().unwrap_or_else(PoisonError::into_inner);
        match &*pending {
            Pending::Idle => Ok(()),
            Pending::Lost(e) => Err(e.clone()),
            Pending::Copy(event) => {
                event.synchronize()?;
                *pending = Pending::Idle;
                Ok(())
            }
        }
    }

    /// The elements, once a pending copy into them has completed.
    pub fn as_slice(&self) -> Result<&[T]> {
        self.wait()?;
        // SAFETY: len initialized elements, alive while self is; no copy
        // writes them (a new one needs &mut self).
        Ok(unsafe { std::slice::from_raw_parts(self.ptr, self.len) })
    }

    /// The elements, writable, once a pending copy into them has completed.
    pub fn as_mut_slice(&mut self) -> Result<&mut [T]> {
        self.wait()?;
        Ok(unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) })
    }

    /// Where an async copy writes (`&mut self`: no slice is borrowed).
    pub(crate) fn dma_target(&mut self) -> Result<*mut T> {
        self.wait()?;
        Ok(self.ptr)
    }

    /// Records what the device does to the buffer after an async copy.
    pub(crate) fn set_pending(&mut self, p: Pending) {
        *self.pending.get_mut().unwrap_or_else(PoisonError::into_inner) = p;
    }

    /// The device address the library maps this memory to.
    pub fn device_pointer(&self) -> Result<sys::metrale_devptr_t> {
        let mut d = 0;
        check(unsafe { sys::metrale_host_device_pointer(self.shared.raw(), self.ptr.cast(), &mut d) })?;
        Ok(d)
    }

    fn release(&mut self) -> Result<()> {
        let ptr = std::mem::replace(&mut self.ptr, std::ptr::null_mut());
        // A copy that may still write it: leaked rather than freed.
        self.wait()?;
        check(unsafe { sys::metrale_host_free_pinned(self.shared.raw(), ptr.cast()) })
    }

    /// Frees now (after a pending copy) and reports the status (Drop
    /// ignores it). When the pending copy cannot be waited for, the memory
    /// is leaked, not freed, and the error says why.
    pub fn free(mut self) -> Result<()> {
        self.release()
    }
}

impl<T: Pod> Drop for PinnedHostBuffer<T> {
    fn drop(&mut self) {
        if !self.ptr.is_null() {
            let _ = self.release();
        }
    }
}

impl<T: Pod> std::fmt::Debug for PinnedHostBuffer<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "PinnedHostBuffer<{}>({:p}, {} elements)", std::any::type_name::<T>(), self.ptr, self.len)
    }
}
