//! The context handle that buffers, streams, events, graphs and kernels
//! share.
//!
//! Every handle keeps an `Arc<Shared>`, so the context lives as long as
//! anything made from it: it is destroyed when the last owner (the
//! [`Context`](crate::Context) or any handle) is dropped, never under a live
//! handle. A handle therefore never meets a destroyed context, and the
//! destroy's sweep only ever finds memory that safe code gave up.

use crate::error::{check, Error, Result, Status};
use metrale_gpu_sys as sys;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, PoisonError, RwLock, RwLockReadGuard};

pub(crate) struct Shared {
    raw: *mut sys::metrale_context_t,
    /// Ledger allocations owned by a live `DeviceBuffer`.
    owned_buffers: AtomicUsize,
    /// Held for reading while a buffer is allocated and counted, for writing
    /// while a sweep checks that none is owned: a sweep never frees memory
    /// that a `DeviceBuffer` allocated on another thread meanwhile owns.
    sweep_gate: RwLock<()>,
}

// SAFETY: the library allows every context function from many threads at
// once; destroy (the only exception) runs in Drop, when no other owner is
// left, so no other thread can be inside a call on it.
unsafe impl Send for Shared {}
unsafe impl Sync for Shared {}

impl Shared {
    pub(crate) fn new(raw: *mut sys::metrale_context_t) -> Arc<Shared> {
        Arc::new(Shared { raw, owned_buffers: AtomicUsize::new(0), sweep_gate: RwLock::new(()) })
    }

    /// The live context pointer: valid while `self` is, since only the last
    /// owner's Drop destroys it.
    pub(crate) fn raw(&self) -> *mut sys::metrale_context_t {
        self.raw
    }

    /// Runs `f` with the context pointer.
    pub(crate) fn with<R>(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> Result<R>) -> Result<R> {
        f(self.raw)
    }

    /// Destroys the context now and reports the library's status (the last
    /// owner only: `Context::close` checked that).
    pub(crate) fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        // SAFETY: raw came from metrale_context_create; nobody else owns it.
        check(unsafe { sys::metrale_context_destroy(raw) })
    }

    /// Allocates through `f` and counts the buffer as owned, both under the
    /// sweep gate.
    pub(crate) fn alloc_owned<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _gate = self.gate_read();
        let r = f()?;
        self.owned_buffers.fetch_add(1, Ordering::AcqRel);
        Ok(r)
    }

    /// A `DeviceBuffer` gave its memory up (freed, or handed to C).
    pub(crate) fn release_owned(&self) {
        self.owned_buffers.fetch_sub(1, Ordering::AcqRel);
    }

    /// Runs `f` (the sweep) only while no `DeviceBuffer` owns ledger memory.
    pub(crate) fn when_nothing_owned<R>(&self, f: impl FnOnce() -> Result<R>) -> Result<R> {
        let _gate = self.sweep_gate.write().unwrap_or_else(PoisonError::into_inner);
        match self.owned_buffers.load(Ordering::Acquire) {
            0 => f(),
            n => Err(Error::new(
                Status::InvalidArgument,
                format!(
                    "sweep_unreleased: {n} DeviceBuffer(s) of this context still own their memory; \
                     the sweep frees only what safe code gave up (DeviceBuffer::into_raw, or the sys crate)"
                ),
            )),
        }
    }

    fn gate_read(&self) -> RwLockReadGuard<'_, ()> {
        self.sweep_gate.read().unwrap_or_else(PoisonError::into_inner)
    }

    pub(crate) fn same(a: &Arc<Shared>, b: &Arc<Shared>) -> Result<()> {
        if Arc::ptr_eq(a, b) {
            Ok(())
        } else {
            Err(Error::new(Status::InvalidArgument, "the handles belong to different contexts"))
        }
    }
}

impl Drop for Shared {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            // SAFETY: the last owner; nobody else can use raw any more.
            unsafe { sys::metrale_context_destroy(self.raw) };
        }
    }
}
