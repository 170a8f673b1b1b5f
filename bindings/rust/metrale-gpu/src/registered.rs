//! The caller's own memory, page-locked for the time of a borrow.

use crate::buffer::{bytes_of, Pod};
use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::shared::Shared;
use metrale_gpu_sys as sys;
use std::sync::Arc;

/// A slice page-locked with `metrale_host_register` for as long as this
/// value lives; unregistered on Drop. It borrows the slice mutably, so the
/// memory can be neither freed nor moved while it is registered, and it
/// keeps its context alive. It dereferences to the slice: no async copy
/// writes into it (the safe API has none that takes it), and an async copy
/// from it is waited for by the library, which knows it is pinned.
///
/// ```compile_fail,E0505
/// # use metrale_gpu::{Backend, Context, ContextOptions};
/// # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
/// let mut v = vec![0u8; 4096];
/// let reg = ctx.register_host(&mut v).unwrap();
/// drop(v); // still registered: the Vec may not be freed
/// drop(reg);
/// ```
pub struct RegisteredHost<'a, T: Pod> {
    shared: Arc<Shared>,
    memory: &'a mut [T],
}

impl<'a, T: Pod> RegisteredHost<'a, T> {
    pub(crate) fn register(ctx: &Context, memory: &'a mut [T]) -> Result<Self> {
        let bytes = bytes_of::<T>(memory.len())?;
        if bytes == 0 {
            return Err(Error::new(Status::InvalidArgument, "register_host: an empty slice cannot be registered"));
        }
        ctx.call(|c| unsafe { sys::metrale_host_register(c, memory.as_mut_ptr().cast(), bytes) })?;
        Ok(RegisteredHost { shared: ctx.shared.clone(), memory })
    }

    /// The device address the library maps this memory to (NotFound where
    /// the backend registered it without a mapping).
    pub fn device_pointer(&self) -> Result<sys::metrale_devptr_t> {
        let mut d = 0;
        check(unsafe { sys::metrale_host_device_pointer(self.shared.raw(), self.memory.as_ptr() as *mut _, &mut d) })?;
        Ok(d)
    }

    /// Unregisters now and reports the status (Drop ignores it).
    pub fn unregister(self) -> Result<()> {
        let me = std::mem::ManuallyDrop::new(self);
        // SAFETY: me is never used or dropped again; the Arc is moved out once.
        let shared = unsafe { std::ptr::read(&me.shared) };
        check(unsafe { sys::metrale_host_unregister(shared.raw(), me.memory.as_ptr() as *mut _) })
    }
}

impl<T: Pod> std::ops::Deref for RegisteredHost<'_, T> {
    type Target = [T];
    fn deref(&self) -> &[T] {
        self.memory
    }
}

impl<T: Pod> std::ops::DerefMut for RegisteredHost<'_, T> {
    fn deref_mut(&mut self) -> &mut [T] {
        self.memory
    }
}

impl<T: Pod> Drop for RegisteredHost<'_, T> {
    fn drop(&mut self) {
        let _ = check(unsafe { sys::metrale_host_unregister(self.shared.raw(), self.memory.as_ptr() as *mut _) });
    }
}

impl<T: Pod> std::fmt::Debug for RegisteredHost<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "RegisteredHost<{}>({:p}, {} elements)", std::any::type_name::<T>(), self.memory.as_ptr(), self.memory.len())
    }
}
