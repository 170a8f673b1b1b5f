//! Host kernels and a host-backend context for the tests.
#![allow(dead_code)]

use metrale_gpu::{host_kernel_param, sys, Backend, Context, ContextOptions};
use std::ffi::c_void;

pub fn host_ctx(redzone: usize) -> Context {
    Context::with_options(&ContextOptions::default().backend(Backend::Host).redzone_bytes(redzone))
        .expect("a host-backend context")
}

/// fill_u32(uint32_t* p, uint32_t value, uint64_t n)
pub unsafe extern "C" fn fill_u32(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let p: u64 = host_kernel_param(call, 0);
    let value: u32 = host_kernel_param(call, 1);
    let n: u64 = host_kernel_param(call, 2);
    std::slice::from_raw_parts_mut(p as *mut u32, n as usize).fill(value);
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

pub fn register(ctx: &Context) {
    ctx.register_host_kernel("test_kernels", "fill_u32", fill_u32, &[8, 4, 8]).unwrap();
    ctx.register_host_kernel("test_kernels", "mixed_params", mixed_params, &[1, 2, 4, 8, 4, 8, 1, 8])
        .unwrap();
}
