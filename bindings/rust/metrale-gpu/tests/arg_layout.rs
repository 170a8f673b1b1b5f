//! The packing rule through a kernel that writes back what it received:
//! Rust host kernels on the host backend, the same names from
//! tests/kernels/test_kernels.cu on cuda (METRALE_BACKEND=cuda with
//! METRALE_TEST_KERNELS naming the fatbin). A launch packed at other
//! offsets than the kernel reads turns these red, or is refused.
//! Self-contained: it shares nothing with the other test files.

use metrale_gpu::{host_kernel_param, sys, Backend, Context, ContextOptions, Param, Pod, Status};
use std::ffi::c_void;

/// struct { uint16_t v[2]; } in the .cu file: Rust's [u16; 2] has its layout.
type U16x2 = [u16; 2];

/// struct sv { uint16_t a; uint8_t b[2]; float c; }: 8 bytes, aligned to 4.
#[repr(C)]
#[derive(Clone, Copy, Debug)]
struct Sv {
    a: u16,
    b: [u8; 2],
    c: f32,
}
// SAFETY: repr(C), Pod fields, no padding.
unsafe impl Pod for Sv {}

fn backend() -> Backend {
    match std::env::var("METRALE_BACKEND").as_deref() {
        Err(_) | Ok("host") => Backend::Host,
        Ok("cuda") => Backend::Cuda,
        Ok(_) => Backend::Auto,
    }
}

unsafe fn out_of(call: *const sys::metrale_host_kernel_call_t, index: usize, n: usize) -> &'static mut [u64] {
    let p: u64 = host_kernel_param(call, index);
    std::slice::from_raw_parts_mut(p as *mut u64, n)
}

unsafe extern "C" fn u8_u16x2_u64(
    call: *const sys::metrale_host_kernel_call_t,
    _: *mut c_void,
) -> sys::metrale_status_t {
    let out = out_of(call, 3, 4);
    let b: U16x2 = host_kernel_param(call, 1);
    out[0] = host_kernel_param::<u8>(call, 0) as u64;
    out[1] = b[0] as u64;
    out[2] = b[1] as u64;
    out[3] = host_kernel_param::<u64>(call, 2);
    sys::METRALE_OK
}

unsafe extern "C" fn six(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let out = out_of(call, 6, 6);
    out[0] = host_kernel_param::<i8>(call, 0) as i64 as u64;
    out[1] = host_kernel_param::<f64>(call, 1).to_bits();
    out[2] = host_kernel_param::<i16>(call, 2) as i64 as u64;
    out[3] = host_kernel_param::<u64>(call, 3);
    out[4] = host_kernel_param::<i64>(call, 4) as u64;
    out[5] = host_kernel_param::<f32>(call, 5).to_bits() as u64;
    sys::METRALE_OK
}

unsafe extern "C" fn by_value(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let out = out_of(call, 2, 5);
    let s: Sv = host_kernel_param(call, 1);
    out[0] = host_kernel_param::<u8>(call, 0) as u64;
    out[1] = s.a as u64;
    out[2] = s.b[0] as u64;
    out[3] = s.b[1] as u64;
    out[4] = s.c.to_bits() as u64;
    sys::METRALE_OK
}

/// A context with the three kernels in module "test_kernels"; host kernels
/// registered with their alignments (the way the crate documents).
fn context() -> Context {
    let ctx = Context::with_options(&ContextOptions::default().backend(backend())).expect("a context");
    if ctx.backend() == Backend::Host {
        let ptr = Param::of::<u64>();
        ctx.register_host_kernel_layout(
            "test_kernels",
            "layout_u8_u16x2_u64",
            u8_u16x2_u64,
            &[Param::of::<u8>(), Param::of::<U16x2>(), Param::of::<u64>(), ptr],
        )
        .unwrap();
        let six_params = [
            Param::of::<i8>(),
            Param::of::<f64>(),
            Param::of::<i16>(),
            ptr,
            Param::of::<i64>(),
            Param::of::<f32>(),
            ptr,
        ];
        ctx.register_host_kernel_layout("test_kernels", "layout_six", six, &six_params).unwrap();
        ctx.register_host_kernel_layout(
            "test_kernels",
            "layout_struct",
            by_value,
            &[Param::of::<u8>(), Param::of::<Sv>(), ptr],
        )
        .unwrap();
    } else {
        let path = std::env::var("METRALE_TEST_KERNELS").unwrap_or_default();
        assert!(!path.is_empty(), "METRALE_TEST_KERNELS must name test_kernels.fatbin on {:?}", ctx.backend());
        ctx.load_module_file("test_kernels", &path).unwrap();
    }
    ctx
}

#[test]
fn u8_u16x2_u64_reaches_the_kernel() {
    let ctx = context();
    let k = ctx.kernel("test_kernels", "layout_u8_u16x2_u64").unwrap();
    let out = ctx.alloc_from(&[0u64; 6]).unwrap();
    let launch = k.launch(1, 1).arg(0xABu8).arg([0x1234u16, 0xBEEF]).arg(0x0102_0304_0506_0708u64).arg(&out);
    assert_eq!(launch.packed().offsets(), &[0, 2, 8, 16]);
    unsafe { launch.run().unwrap() };
    assert_eq!(&out.to_vec().unwrap()[..4], &[0xAB, 0x1234, 0xBEEF, 0x0102_0304_0506_0708]);
}

#[test]
fn char_double_short_pointer_longlong_float_reach_the_kernel() {
    let ctx = context();
    let k = ctx.kernel("test_kernels", "layout_six").unwrap();
    let out = ctx.alloc_from(&[0u64; 6]).unwrap();
    let launch = k
        .launch(1, 1)
        .arg(b'Z' as i8)
        .arg(-2.5e300f64)
        .arg(-1234i16)
        .arg(0x1122_3344_5566_7788u64) // a pointer's bits, never dereferenced
        .arg(-0x0123_4567_89AB_CDEFi64)
        .arg(3.25f32)
        .arg(&out);
    assert_eq!(launch.packed().offsets(), &[0, 8, 16, 24, 32, 40, 48]);
    unsafe { launch.run().unwrap() };
    let want = [
        b'Z' as u64,
        (-2.5e300f64).to_bits(),
        -1234i64 as u64,
        0x1122_3344_5566_7788,
        -0x0123_4567_89AB_CDEFi64 as u64,
        3.25f32.to_bits() as u64,
    ];
    assert_eq!(out.to_vec().unwrap(), want);
}

#[test]
fn struct_by_value_reaches_the_kernel() {
    let ctx = context();
    let k = ctx.kernel("test_kernels", "layout_struct").unwrap();
    let out = ctx.alloc_from(&[0u64; 6]).unwrap();
    let s = Sv { a: 0xCAFE, b: [0x11, 0x22], c: -0.75 };
    let launch = k.launch(1, 1).arg(0x7Eu8).arg(s).arg(&out);
    assert_eq!(launch.packed().offsets(), &[0, 4, 16]);
    unsafe { launch.run().unwrap() };
    assert_eq!(&out.to_vec().unwrap()[..5], &[0x7E, 0xCAFE, 0x11, 0x22, (-0.75f32).to_bits() as u64]);
}

/// Arguments of other types than the kernel's (u32 where it takes
/// uint16_t[2]) land at other offsets: refused, naming the parameter.
#[test]
fn other_offsets_are_refused() {
    let ctx = context();
    let k = ctx.kernel("test_kernels", "layout_u8_u16x2_u64").unwrap();
    match k.param_layout() {
        Ok(layout) => assert_eq!(layout, vec![(0, 1), (2, 4), (8, 8), (16, 8)]),
        Err(e) if e.status == Status::Unsupported && ctx.backend() != Backend::Host => {
            eprintln!("skipped: the driver has no cuFuncGetParamInfo: {e}");
            return;
        }
        Err(e) => panic!("param_layout: {e}"),
    }
    let out = ctx.alloc_from(&[7u64; 6]).unwrap();
    let err = unsafe { k.launch(1, 1).arg(0xABu8).arg(0xBEEF_1234u32).arg(1u64).arg(&out).run() }.unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.to_string().contains("parameter 1"), "{err}");
    assert_eq!(out.to_vec().unwrap(), vec![7u64; 6], "nothing ran");
}

/// The sizes-only registration infers [u16; 2]'s alignment as 4: the
/// launch, packed at 2, is refused instead of read at 4.
#[test]
fn sizes_only_registration_is_caught() {
    let ctx = context();
    if ctx.backend() != Backend::Host {
        eprintln!("skipped on {:?}: host registration only", ctx.backend());
        return;
    }
    ctx.register_host_kernel("old", "f", u8_u16x2_u64, &[1, 4, 8, 8]).unwrap();
    let k = ctx.kernel("old", "f").unwrap();
    assert_eq!(k.param_layout().unwrap()[1], (4, 4));
    let out = ctx.alloc_from(&[7u64; 6]).unwrap();
    let err = unsafe { k.launch(1, 1).arg(0xABu8).arg([1u16, 2]).arg(3u64).arg(&out).run() }.unwrap_err();
    assert_eq!(err.status, Status::InvalidArgument);
    assert!(err.to_string().contains("expects offset 4"), "{err}");
    assert_eq!(out.to_vec().unwrap(), vec![7u64; 6]);
}
