//! The test context and the "test_kernels" module on either backend.
//!
//! METRALE_BACKEND picks the backend (host when unset, as the library's own
//! variable). On host the kernels are Rust functions registered under the
//! names of tests/kernels/test_kernels.cu; on cuda the fatbin named by
//! METRALE_TEST_KERNELS is loaded instead. Tests must not assume fresh device
//! memory is zero, nor that a device pointer is a host address.
#![allow(dead_code)]

use metrale_gpu::{host_kernel_param, sys, Backend, Context, ContextOptions};
use std::ffi::c_void;
use std::sync::{Mutex, MutexGuard};

/// The backend METRALE_BACKEND asks for: host when unset.
pub fn wanted_backend() -> Backend {
    match std::env::var("METRALE_BACKEND").as_deref() {
        Err(_) | Ok("host") => Backend::Host,
        Ok("cuda") => Backend::Cuda,
        Ok("auto") => Backend::Auto,
        Ok(other) => panic!("METRALE_BACKEND={other}: expected host, cuda or auto"),
    }
}

/// A context on the chosen backend with the "test_kernels" module ready.
pub fn test_ctx(redzone: usize) -> Context {
    let backend = wanted_backend();
    let ctx = Context::with_options(&ContextOptions::default().backend(backend).redzone_bytes(redzone))
        .unwrap_or_else(|e| panic!("a {backend:?}-backend context: {e}"));
    load_test_kernels(&ctx);
    ctx
}

/// True (after saying why on stderr) when the test only makes sense on the
/// host backend; the caller returns early.
pub fn skip_unless_host(ctx: &Context, why: &str) -> bool {
    if ctx.backend() == Backend::Host {
        return false;
    }
    eprintln!("skipped on {:?}: {why}", ctx.backend());
    true
}

/// CUDA forbids synchronizing a whole context while any of its streams is
/// capturing (the capture is invalidated), and a red-zone scan on cuda
/// begins with cuCtxSynchronize. The tests run on several threads sharing
/// the device's primary context, so those that capture and those that scan
/// hold this lock.
pub fn capture_or_scan_lock() -> MutexGuard<'static, ()> {
    static LOCK: Mutex<()> = Mutex::new(());
    LOCK.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn load_test_kernels(ctx: &Context) {
    if ctx.backend() == Backend::Host {
        register_host_kernels(ctx);
        return;
    }
    let path = std::env::var("METRALE_TEST_KERNELS").unwrap_or_default();
    assert!(!path.is_empty(), "METRALE_TEST_KERNELS must name test_kernels.fatbin on the {:?} backend", ctx.backend());
    ctx.load_module_file("test_kernels", &path).unwrap_or_else(|e| panic!("loading {path}: {e}"));
}

/// fill_u32(uint32_t* p, uint32_t value, uint64_t n)
pub unsafe extern "C" fn fill_u32(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let p: u64 = host_kernel_param(call, 0);
    let value: u32 = host_kernel_param(call, 1);
    let n: u64 = host_kernel_param(call, 2);
    std::slice::from_raw_parts_mut(p as *mut u32, n as usize).fill(value);
    sys::METRALE_OK
}

/// overflow_write(uint8_t* p, uint64_t bytes, uint64_t extra, uint32_t value):
/// the planted bug, writing `extra` bytes past the end.
pub unsafe extern "C" fn overflow_write(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let p: u64 = host_kernel_param(call, 0);
    let bytes: u64 = host_kernel_param(call, 1);
    let extra: u64 = host_kernel_param(call, 2);
    let value: u32 = host_kernel_param(call, 3);
    std::slice::from_raw_parts_mut(p as *mut u8, (bytes + extra) as usize).fill(value as u8);
    sys::METRALE_OK
}

/// mixed_params(u8 a, u16 b, u32 c, u64 d, f32 e, f64 f, i8 g, u64* out)
pub unsafe extern "C" fn mixed_params(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let out: u64 = host_kernel_param(call, 7);
    let out = std::slice::from_raw_parts_mut(out as *mut u64, 7);
    out[0] = host_kernel_param::<u8>(call, 0) as u64;
    out[1] = host_kernel_param::<u16>(call, 1) as u64;
    out[2] = host_kernel_param::<u32>(call, 2) as u64;
    out[3] = host_kernel_param::<u64>(call, 3);
    out[4] = (host_kernel_param::<f32>(call, 4) as f64).to_bits();
    out[5] = host_kernel_param::<f64>(call, 5).to_bits();
    out[6] = host_kernel_param::<i8>(call, 6) as i64 as u64;
    sys::METRALE_OK
}

fn register_host_kernels(ctx: &Context) {
    ctx.register_host_kernel("test_kernels", "fill_u32", fill_u32, &[8, 4, 8]).unwrap();
    ctx.register_host_kernel("test_kernels", "overflow_write", overflow_write, &[8, 8, 8, 4]).unwrap();
    ctx.register_host_kernel("test_kernels", "mixed_params", mixed_params, &[1, 2, 4, 8, 4, 8, 1, 8])
        .unwrap();
}
