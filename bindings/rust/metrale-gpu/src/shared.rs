//! The context handle that buffers, streams and kernels share.
//!
//! Every handle keeps an `Arc<Shared>`. Closing the context nulls the raw
//! pointer under the write lock, so a handle used afterwards gets an error
//! instead of touching freed memory, and its Drop does nothing (the
//! context's destroy already released what it held).

use crate::error::{Error, Result};
use metrale_gpu_sys as sys;
use std::sync::{Arc, PoisonError, RwLock};

pub(crate) struct Shared {
    raw: RwLock<*mut sys::metrale_context_t>,
}

// SAFETY: the library allows every context function from many threads at
// once; destroy (the only exception) runs under the write lock.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(raw: *mut sys::metrale_context_t) -> Arc<Shared> {
        Arc::new(Shared { raw: RwLock::new(raw) })
    }

    /// Runs `f` with the live context pointer; the context cannot be closed
    /// while `f` runs.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> Result<R>) -> Result<R> {
        let guard = self.raw.read().unwrap_or_else(PoisonError::into_inner);
        if guard.is_null() {
            return Err(Error::closed());
        }
        f(*guard)
    }

    /// Destroys the context once; later calls are `Err(closed)`.
    pub(crate) fn close(&self) -> Result<()> {
        let mut guard = self.raw.write().unwrap_or_else(PoisonError::into_inner);
        if guard.is_null() {
            return Err(Error::closed());
        }
        let raw = std::mem::replace(&mut *guard, std::ptr::null_mut());
        // SAFETY: raw came from metrale_context_create and is destroyed once.
        crate::error::check(unsafe { sys::metrale_context_destroy(raw) })
    }

    pub(crate) fn same(a: &Arc<Shared>, b: &Arc<Shared>) -> Result<()> {
        if Arc::ptr_eq(a, b) {
            Ok(())
        } else {
            Err(Error::new(
                crate::Status::InvalidArgument,
                "the handles belong to different contexts",
            ))
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        let raw = *self.raw.get_mut().unwrap_or_else(PoisonError::into_inner);
        if !raw.is_null() {
            // SAFETY: the last owner; nobody else can use raw any more.
            unsafe { sys::metrale_context_destroy(raw) };
        }
    }
}
