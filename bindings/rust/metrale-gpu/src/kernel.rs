//! Modules, kernel handles and helpers for host kernels written in Rust.

use crate::buffer::Pod;
use crate::context::Context;
use crate::error::{check, Result};
use crate::launch::Launch;
use crate::shared::Shared;
use crate::util::{c_string, Site};
use metrale_gpu_sys as sys;
use std::sync::Arc;

/// Grid or block dimensions. `From` a `u32`, `(u32, u32)` or `(u32, u32, u32)`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Dim3 {
    /// Extent in x.
    pub x: u32,
    /// Extent in y.
    pub y: u32,
    /// Extent in z.
    pub z: u32,
}

impl From<u32> for Dim3 {
    fn from(x: u32) -> Dim3 {
        Dim3 { x, y: 1, z: 1 }
    }
}
impl From<(u32, u32)> for Dim3 {
    fn from((x, y): (u32, u32)) -> Dim3 {
        Dim3 { x, y, z: 1 }
    }
}
impl From<(u32, u32, u32)> for Dim3 {
    fn from((x, y, z): (u32, u32, u32)) -> Dim3 {
        Dim3 { x, y, z }
    }
}
impl From<sys::metrale_dim3_t> for Dim3 {
    fn from(d: sys::metrale_dim3_t) -> Dim3 {
        Dim3 { x: d.x, y: d.y, z: d.z }
    }
}
impl From<Dim3> for sys::metrale_dim3_t {
    fn from(d: Dim3) -> sys::metrale_dim3_t {
        sys::metrale_dim3_t { x: d.x, y: d.y, z: d.z }
    }
}

/// A loaded or host-registered module, by name.
#[derive(Clone)]
pub struct Module {
    shared: Arc<Shared>,
    name: String,
}

impl Module {
    pub(crate) fn new(ctx: &Context, name: &str) -> Module {
        Module { shared: ctx.shared.clone(), name: name.to_string() }
    }

    /// The module's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Looks up a function of this module; the audit records the caller's line.
    #[track_caller]
    pub fn kernel(&self, func: &str) -> Result<Kernel> {
        Kernel::lookup(&self.shared, &self.name, func, crate::util::site())
    }

    /// Unloads the module; its kernels then fail to launch with NotFound.
    pub fn unload(self) -> Result<()> {
        let n = c_string(&self.name)?;
        self.shared.with(|c| check(unsafe { sys::metrale_module_unload(c, n.as_ptr()) }))
    }
}

/// A kernel handle (owned by the context; nothing to destroy).
#[derive(Clone)]
pub struct Kernel {
    pub(crate) shared: Arc<Shared>,
    pub(crate) raw: *mut sys::metrale_kernel_t,
    name: String,
}

unsafe impl Send for Kernel {}
unsafe impl Sync for Kernel {}

impl Kernel {
    pub(crate) fn get(ctx: &Context, module: &str, func: &str, site: Site) -> Result<Kernel> {
        Kernel::lookup(&ctx.shared, module, func, site)
    }

    fn lookup(shared: &Arc<Shared>, module: &str, func: &str, site: Site) -> Result<Kernel> {
        let (m, f) = (c_string(module)?, c_string(func)?);
        let mut raw = std::ptr::null_mut();
        shared.with(|c| {
            check(unsafe {
                sys::metrale_kernel_get_at(c, m.as_ptr(), f.as_ptr(), site.file.as_ptr(), site.line, &mut raw)
            })
        })?;
        Ok(Kernel { shared: shared.clone(), raw, name: format!("{module}::{func}") })
    }

    /// "module::function".
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A launch builder: add arguments with [`Launch::arg`], then run it.
    pub fn launch(&self, grid: impl Into<Dim3>, block: impl Into<Dim3>) -> Launch<'_> {
        Launch::new(self, grid.into(), block.into())
    }

    /// The raw handle, for calls through `metrale_gpu_sys`.
    pub fn as_raw(&self) -> *mut sys::metrale_kernel_t {
        self.raw
    }
}

/// Reads parameter `index` of a host-kernel call as a `T`.
///
/// # Safety
/// `call` must be the pointer a host kernel received, registered with
/// parameter sizes (so `params` is set), `index` below the parameter count
/// and `T` the parameter's type.
pub unsafe fn host_kernel_param<T: Pod>(call: *const sys::metrale_host_kernel_call_t, index: usize) -> T {
    let params = (*call).params;
    std::ptr::read_unaligned((*params.add(index)).cast::<T>())
}

impl std::fmt::Debug for Module {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Module({})", self.name)
    }
}

impl std::fmt::Debug for Kernel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Kernel({})", self.name)
    }
}
