//! Context creation, options, modules, kernels and device queries.

use crate::buffer::{DeviceBuffer, Pod};
use crate::error::{check, Error, Result, Status};
use crate::kernel::{Kernel, Module};
use crate::pinned::PinnedHostBuffer;
use crate::registered::RegisteredHost;
use crate::shared::Shared;
use crate::stream::{Event, Stream};
use crate::util::{c_string, site};
use metrale_gpu_sys as sys;
use std::ffi::{c_void, CStr};
use std::path::Path;
use std::sync::Arc;

/// Which backend a context runs on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Backend {
    /// CUDA where a device answers, else host.
    Auto,
    /// The CUDA driver (loaded at run time); NoDriver or NoDevice without one.
    Cuda,
    /// Device memory is host memory; kernels are registered C/Rust functions.
    Host,
}

impl Backend {
    pub(crate) fn to_raw(self) -> sys::metrale_backend_t {
        match self {
            Backend::Auto => sys::METRALE_BACKEND_AUTO,
            Backend::Cuda => sys::METRALE_BACKEND_CUDA,
            Backend::Host => sys::METRALE_BACKEND_HOST,
        }
    }
    pub(crate) fn from_raw(raw: sys::metrale_backend_t) -> Backend {
        match raw {
            sys::METRALE_BACKEND_CUDA => Backend::Cuda,
            sys::METRALE_BACKEND_HOST => Backend::Host,
            _ => Backend::Auto,
        }
    }
}

/// Options for [`Context::with_options`]; `Default` is the library's
/// defaults. Environment variables (`METRALE_BACKEND`, `METRALE_REDZONE`,
/// ...) override them at creation.
#[derive(Clone, Copy, Debug)]
pub struct ContextOptions {
    raw: sys::metrale_context_options_t,
}

impl Default for ContextOptions {
    fn default() -> Self {
        let mut raw = sys::metrale_context_options_t::default();
        // SAFETY: a valid out-pointer; cannot fail with one.
        unsafe {
            sys::metrale_context_options_init_sized(
                &mut raw,
                std::mem::size_of::<sys::metrale_context_options_t>(),
            )
        };
        ContextOptions { raw }
    }
}

impl ContextOptions {
    /// Which backend to use (default [`Backend::Auto`]).
    pub fn backend(mut self, b: Backend) -> Self {
        self.raw.backend = b.to_raw();
        self
    }
    /// The CUDA device ordinal (default 0).
    pub fn device(mut self, ordinal: i32) -> Self {
        self.raw.device = ordinal;
        self
    }
    /// Bytes of red-zone pad after each allocation (0 = off).
    pub fn redzone_bytes(mut self, bytes: usize) -> Self {
        self.raw.redzone_bytes = bytes;
        self
    }
    /// Pads only allocations whose sequence number is at least `seq`.
    pub fn redzone_min_index(mut self, seq: u64) -> Self {
        self.raw.redzone_min_index = seq;
        self
    }
    /// Checks every device range of copies and memsets against the ledger.
    pub fn checked_pointers(mut self, on: bool) -> Self {
        self.raw.checked_pointers = on.into();
        self
    }
    /// Synchronizes after every launch, so a fault names its launch.
    pub fn debug_sync(mut self, on: bool) -> Self {
        self.raw.debug_sync = on.into();
        self
    }
    /// Records launches, device copies and memsets ([`Context::launch_trace`]).
    pub fn launch_trace(mut self, on: bool) -> Self {
        self.raw.launch_trace = on.into();
        self
    }
    /// Times every launch with events ([`Context::kernel_timings`]).
    pub fn kernel_timing(mut self, on: bool) -> Self {
        self.raw.kernel_timing = on.into();
        self
    }
    /// Entries kept by the launch trace and the kernel audit (newest kept).
    pub fn trace_capacity(mut self, entries: usize) -> Self {
        self.raw.trace_capacity = entries;
        self
    }
    /// The C struct, for code that calls the sys crate.
    pub fn as_raw(&self) -> &sys::metrale_context_options_t {
        &self.raw
    }
}

/// A host kernel: called once per launch with the grid, block and arguments.
pub type HostKernelFn = unsafe extern "C" fn(
    call: *const sys::metrale_host_kernel_call_t,
    user: *mut c_void,
) -> sys::metrale_status_t;

/// A device context.
///
/// Every handle made from it (buffers, pinned memory, streams, events,
/// graphs, modules, kernels) shares ownership of it, as clones of the
/// `Context` do: the library's context is destroyed when the last of them
/// is dropped, never under a live handle. [`Context::close`] destroys it at
/// once when nothing else holds it, and reports the status.
///
/// ```compile_fail,E0507
/// // Only the owner can close a context: not through a reference.
/// fn close_shared(ctx: &metrale_gpu::Context) {
///     ctx.close().unwrap();
/// }
/// ```
#[derive(Clone)]
pub struct Context {
    pub(crate) shared: Arc<Shared>,
}

impl Context {
    /// A context with the default options (the auto backend).
    pub fn new() -> Result<Context> {
        Context::with_options(&ContextOptions::default())
    }

    /// A context with the given options (environment variables override
    /// them).
    pub fn with_options(opts: &ContextOptions) -> Result<Context> {
        let mut raw = std::ptr::null_mut();
        // SAFETY: valid pointers; on OK raw is a context we own.
        check(unsafe { sys::metrale_context_create(&opts.raw, &mut raw) })?;
        Ok(Context { shared: Shared::new(raw) })
    }

    /// Destroys the context now and reports the library's status, when
    /// this is its last owner. While other handles (clones, buffers,
    /// streams, events, graphs, modules, kernels) still hold it, nothing is
    /// destroyed: `Err(InvalidArgument)` says how many, and the context is
    /// destroyed when the last of them is dropped, as if this `Context` had
    /// been dropped. Dropping the last owner destroys it and ignores the
    /// status.
    pub fn close(self) -> Result<()> {
        match Arc::try_unwrap(self.shared) {
            Ok(shared) => shared.destroy(),
            Err(still) => {
                let others = Arc::strong_count(&still) - 1;
                Err(Error::new(
                    Status::InvalidArgument,
                    format!(
                        "close: {others} other handle(s) (buffers, streams, events, graphs, kernels, clones) still \
                         use this context; it is destroyed when the last of them is dropped"
                    ),
                ))
            }
        }
    }

    /// The raw pointer, for calls through `metrale_gpu_sys`. Valid while
    /// this `Context` (or any handle made from it) lives.
    pub fn as_raw(&self) -> *mut sys::metrale_context_t {
        self.shared.raw()
    }

    pub(crate) fn call(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> sys::metrale_status_t) -> Result<()> {
        self.shared.with(|c| check(f(c)))
    }

    /// The backend this context runs on.
    pub fn backend(&self) -> Backend {
        // SAFETY: a live context.
        Backend::from_raw(unsafe { sys::metrale_context_backend(self.shared.raw()) })
    }

    /// `Err(ContextLost)` once a sticky device fault was latched.
    pub fn fault(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_context_fault(c) })
    }

    /// Makes the device context current on this thread (for direct driver calls).
    pub fn bind_thread(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_context_bind_thread(c) })
    }

    /// Allocates `len` elements of device memory; the ledger records the
    /// caller's file and line.
    #[track_caller]
    pub fn alloc<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::alloc(self, len, false, site())
    }

    /// As [`Context::alloc`] for managed (unified) memory.
    #[track_caller]
    pub fn alloc_managed<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::alloc(self, len, true, site())
    }

    /// Allocates a buffer the size of `data` and copies `data` into it.
    #[track_caller]
    pub fn alloc_from<T: Pod>(&self, data: &[T]) -> Result<DeviceBuffer<T>> {
        let mut buf = DeviceBuffer::alloc(self, data.len(), false, site())?;
        buf.copy_from_host(data)?;
        Ok(buf)
    }

    /// Device memory off the ledger, without a red zone, for arenas the
    /// caller manages (`metrale_alloc_arena`); freed on Drop.
    pub fn alloc_arena<T: Pod>(&self, len: usize) -> Result<DeviceBuffer<T>> {
        DeviceBuffer::alloc_arena(self, len)
    }

    /// Page-locked host memory of `len` elements, zeroed.
    pub fn alloc_pinned<T: Pod>(&self, len: usize) -> Result<PinnedHostBuffer<T>> {
        PinnedHostBuffer::alloc(self, len)
    }

    /// Page-locks `memory` for as long as the returned value lives (it
    /// borrows `memory` mutably, so the memory cannot be freed or moved
    /// meanwhile); unregistered on Drop.
    pub fn register_host<'a, T: Pod>(&self, memory: &'a mut [T]) -> Result<RegisteredHost<'a, T>> {
        RegisteredHost::register(self, memory)
    }

    /// The context's own stream (what a missing stream means everywhere).
    pub fn default_stream(&self) -> Result<Stream> {
        Stream::default_of(self)
    }

    /// A new stream, destroyed on Drop.
    pub fn create_stream(&self) -> Result<Stream> {
        Stream::create(self)
    }

    /// An event; `timing` false makes it cheaper and refuses elapsed time.
    pub fn create_event(&self, timing: bool) -> Result<Event> {
        Event::create(self, timing)
    }

    /// Waits for the default stream.
    pub fn synchronize(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_stream_synchronize(c, std::ptr::null_mut()) })
    }

    /// Registers `f` as `module::func` on the host backend, with the
    /// kernel's parameter sizes (packed launches are checked against them).
    pub fn register_host_kernel(&self, module: &str, func: &str, f: HostKernelFn, param_sizes: &[usize]) -> Result<Module> {
        // SAFETY: a NULL user pointer is never dereferenced by the library.
        unsafe { self.register_host_kernel_with_user(module, func, f, std::ptr::null_mut(), param_sizes) }
    }

    /// As [`Context::register_host_kernel`] with a user pointer passed to `f`.
    ///
    /// # Safety
    /// `user` must stay valid for as long as the kernel can be launched.
    pub unsafe fn register_host_kernel_with_user(
        &self,
        module: &str,
        func: &str,
        f: HostKernelFn,
        user: *mut c_void,
        param_sizes: &[usize],
    ) -> Result<Module> {
        let (m, fname) = (c_string(module)?, c_string(func)?);
        self.call(|c| unsafe {
            sys::metrale_module_register_host_params(
                c, m.as_ptr(), fname.as_ptr(), Some(f), user, param_sizes.as_ptr(), param_sizes.len(),
            )
        })?;
        Ok(Module::new(self, module))
    }

    /// Loads a module image (PTX, cubin or fatbin) under `name` (cuda backend).
    pub fn load_module_data(&self, name: &str, image: &[u8]) -> Result<Module> {
        let n = c_string(name)?;
        self.call(|c| unsafe {
            sys::metrale_module_load_data(c, n.as_ptr(), image.as_ptr().cast(), image.len())
        })?;
        Ok(Module::new(self, name))
    }

    /// Loads a module image from a file (cuda backend).
    pub fn load_module_file(&self, name: &str, path: impl AsRef<Path>) -> Result<Module> {
        let n = c_string(name)?;
        let p = c_string(path.as_ref().to_str().ok_or_else(|| {
            Error::new(Status::InvalidArgument, "the module path is not valid UTF-8")
        })?)?;
        self.call(|c| unsafe { sys::metrale_module_load_file(c, n.as_ptr(), p.as_ptr()) })?;
        Ok(Module::new(self, name))
    }

    /// A handle on a module already loaded or registered; NotFound if none.
    pub fn module(&self, name: &str) -> Result<Module> {
        if self.has_module(name)? {
            Ok(Module::new(self, name))
        } else {
            Err(Error::new(Status::NotFound, format!("no module named '{name}'")))
        }
    }

    /// True when a module of that name is loaded or registered.
    pub fn has_module(&self, name: &str) -> Result<bool> {
        let n = c_string(name)?;
        Ok(unsafe { sys::metrale_has_module(self.shared.raw(), n.as_ptr()) } == 1)
    }

    /// Looks up `module::func`; the kernel audit records the caller's line.
    #[track_caller]
    pub fn kernel(&self, module: &str, func: &str) -> Result<Kernel> {
        Kernel::get(self, module, func, site())
    }

    /// The device's name, compute capability, SMs and memory.
    pub fn device_info(&self) -> Result<crate::DeviceInfo> {
        let mut info: sys::metrale_device_info_t = unsafe { std::mem::zeroed() };
        self.call(|c| unsafe { sys::metrale_device_info(c, &mut info) })?;
        let name = unsafe { CStr::from_ptr(info.name.as_ptr()) }.to_string_lossy().into_owned();
        Ok(crate::DeviceInfo {
            name,
            compute_capability: (info.compute_major, info.compute_minor),
            sm_count: info.sm_count,
            total_memory: info.total_memory,
            backend: Backend::from_raw(info.backend),
            ordinal: info.ordinal,
        })
    }

    fn size_query(&self, f: unsafe extern "C" fn(*mut sys::metrale_context_t, *mut usize) -> sys::metrale_status_t) -> Result<usize> {
        let mut n = 0usize;
        self.call(|c| unsafe { f(c, &mut n) })?;
        Ok(n)
    }

    /// The device's total memory in bytes.
    pub fn total_memory(&self) -> Result<usize> {
        self.size_query(sys::metrale_total_memory)
    }
    /// What this context can still get (device free plus cached).
    pub fn free_memory(&self) -> Result<usize> {
        self.size_query(sys::metrale_free_memory)
    }
    /// What the device itself reports free.
    pub fn device_free_memory(&self) -> Result<usize> {
        self.size_query(sys::metrale_device_free_memory)
    }
    /// Bytes (as asked) held by live ledger allocations.
    pub fn live_bytes(&self) -> Result<usize> {
        self.size_query(sys::metrale_live_bytes)
    }
    /// The number of live ledger allocations.
    pub fn live_count(&self) -> Result<usize> {
        self.size_query(sys::metrale_live_count)
    }
    /// Bytes reserved beyond those asked for, from size rounding.
    pub fn chunk_slack_bytes(&self) -> Result<usize> {
        self.size_query(sys::metrale_chunk_slack_bytes)
    }
}

impl std::fmt::Debug for Context {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Context").field("backend", &self.backend()).finish()
    }
}
