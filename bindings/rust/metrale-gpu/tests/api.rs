//! The safe API on the backend METRALE_BACKEND names (host by default):
//! sites, launches, graphs, red zones, and bad input coming back as errors.

mod common;

use common::{capture_or_scan_lock, skip_unless_host, test_ctx};
use metrale_gpu::{sys, Level, Status};
use std::sync::{Arc, Mutex};

#[test]
fn ledger_names_the_callers_line() {
    let ctx = test_ctx(0);
    let line = line!() + 1;
    let buf = ctx.alloc::<f32>(100).unwrap();
    let live = ctx.live_allocations().unwrap();
    assert_eq!(live.len(), 1);
    assert_eq!(live[0].ptr, buf.as_devptr());
    assert_eq!(live[0].bytes, 400);
    assert_eq!(live[0].file, file!());
    assert_eq!(live[0].line as u32, line);
    assert!(ctx.alloc_report(0, 0).unwrap().contains(&format!("{}:{line}", file!())));
    assert_eq!(ctx.live_bytes().unwrap(), 400);
    buf.free().unwrap();
    assert_eq!(ctx.live_count().unwrap(), 0);
}

#[test]
fn copies_round_trip_and_check_sizes() {
    let ctx = test_ctx(0);
    let a = ctx.alloc_from(&[1u64, 2, 3]).unwrap();
    let mut b = ctx.alloc::<u64>(3).unwrap();
    b.copy_from(&a).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![1, 2, 3]);
    let e = b.copy_from_host(&[0u64; 4]).unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument);
    let mut big = [0u64; 5];
    assert_eq!(b.copy_to_host(&mut big).unwrap_err().status, Status::InvalidArgument);
    b.memset(0).unwrap();
    assert_eq!(b.to_vec().unwrap(), vec![0, 0, 0]);
}

#[test]
fn packed_launch_respects_alignment() {
    let ctx = test_ctx(0);
    let k = ctx.kernel("test_kernels", "mixed_params").unwrap();
    let out = ctx.alloc::<u64>(7).unwrap();
    let launch = k
        .launch(1, 1)
        .arg(0xABu8)
        .arg(0xBEEFu16)
        .arg(0xDEADBEEFu32)
        .arg(u64::MAX - 1)
        .arg(1.5f32)
        .arg(-2.25f64)
        .arg(-7i8)
        .arg(&out);
    assert_eq!(launch.packed_args().len(), 48);
    assert_eq!(&launch.packed_args()[16..20], &1.5f32.to_ne_bytes());
    unsafe { launch.run().unwrap() };
    let got = out.to_vec().unwrap();
    assert_eq!(got, vec![0xAB, 0xBEEF, 0xDEADBEEF, u64::MAX - 1, 1.5f64.to_bits(), (-2.25f64).to_bits(), (-7i64) as u64]);
}

#[test]
fn wrong_argument_sizes_are_errors() {
    let ctx = test_ctx(0);
    let k = ctx.kernel("test_kernels", "fill_u32").unwrap();
    let buf = ctx.alloc::<u32>(4).unwrap();
    let e = unsafe { k.launch(1, 1).arg(&buf).arg(1u32).arg(4u64).arg(0u64).run() }.unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    let e = unsafe { k.launch(1, 1).arg(&buf).run() }.unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
    let e = unsafe { k.launch(0, 1).arg(&buf).arg(1u32).arg(4u64).run() }.unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "{e}");
}

#[test]
fn null_ish_values_are_errors() {
    let ctx = test_ctx(0);
    assert_eq!(ctx.alloc::<u8>(0).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(ctx.alloc::<u64>(usize::MAX).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(ctx.kernel("no_such_module", "f").unwrap_err().status, Status::NotFound);
    assert_eq!(ctx.kernel("bad\0name", "f").unwrap_err().status, Status::InvalidArgument);
    assert_eq!(ctx.module("no_such_module").unwrap_err().status, Status::NotFound);
    assert!(!ctx.has_module("no_such_module").unwrap());
    let e = ctx.kernel("no_such_module", "f").unwrap_err();
    assert!(!e.message.is_empty(), "the library's message is carried");
    assert!(e.to_string().starts_with("METRALE_ERROR_NOT_FOUND"));
    let audit = ctx.kernel_audit().unwrap();
    assert!(audit.iter().any(|a| !a.found && a.file == file!()));
}

#[test]
fn close_with_live_handles_destroys_nothing_and_they_keep_working() {
    let ctx = test_ctx(0);
    let mut buf = ctx.alloc::<u32>(16).unwrap();
    let stream = ctx.create_stream().unwrap();
    let event = ctx.create_event(true).unwrap();
    let k = ctx.kernel("test_kernels", "fill_u32").unwrap();
    let e = ctx.close().unwrap_err(); // consumes the Context: a second close does not compile
    assert_eq!(e.status, Status::InvalidArgument);
    assert!(e.message.contains("4 other handle(s)"), "{e}");
    buf.copy_from_host(&[1u32; 16]).unwrap();
    unsafe { k.launch(1, 16).arg(&buf).arg(3u32).arg(16u64).stream(&stream).run().unwrap() };
    event.record(&stream).unwrap();
    event.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![3; 16]);
    buf.free().unwrap(); // the context was not destroyed under it
    drop((stream, event, k)); // the last owner destroys the context
}

#[test]
fn free_twice_is_impossible_and_sweep_then_free_is_not_found() {
    let ctx = test_ctx(0);
    let buf = ctx.alloc::<u8>(8).unwrap();
    let e = ctx.sweep_unreleased().unwrap_err();
    assert_eq!(e.status, Status::InvalidArgument, "a buffer safe code owns is not swept: {e}");
    assert_eq!(ctx.live_count().unwrap(), 1);
    let raw = buf.into_raw();
    assert_eq!(ctx.sweep_unreleased().unwrap(), 1, "given up, it is swept");
    assert_eq!(unsafe { sys::metrale_free(ctx.as_raw(), raw) }, sys::METRALE_ERROR_NOT_FOUND);
    let default = ctx.default_stream().unwrap();
    assert_eq!(default.destroy().unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn handles_from_another_context_are_refused() {
    let (a, b) = (test_ctx(0), test_ctx(0));
    let mut buf_a = a.alloc::<u8>(8).unwrap();
    let mut buf_b = b.alloc::<u8>(8).unwrap();
    assert_eq!(buf_b.copy_from(&buf_a).unwrap_err().status, Status::InvalidArgument);
    let s = b.create_stream().unwrap();
    assert_eq!(buf_a.memset_async(0, &s).unwrap_err().status, Status::InvalidArgument);
}

#[test]
fn graph_captures_and_replays() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let k = ctx.kernel("test_kernels", "fill_u32").unwrap();
    let mut buf = ctx.alloc::<u32>(64).unwrap();
    buf.memset(0).unwrap(); // new memory holds whatever was there before
    let mut s = ctx.create_stream().unwrap();
    let cap = s.begin_capture().unwrap();
    assert!(cap.stream().is_capturing());
    unsafe { k.launch(1, 64).stream(cap.stream()).arg(&buf).arg(9u32).arg(64u64).run().unwrap() };
    let g = cap.end().unwrap();
    assert!(!s.is_capturing());
    assert!(buf.to_vec().unwrap().iter().all(|&v| v == 0), "captured, not run");
    g.launch(&s).unwrap();
    s.synchronize().unwrap();
    assert!(buf.to_vec().unwrap().iter().all(|&v| v == 9));
    assert_eq!(ctx.counters().unwrap().graph_launches, 1);
}

#[test]
fn redzone_overflow_is_reported_with_the_site() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(64);
    let line = line!() + 1;
    let buf = ctx.alloc::<u8>(32).unwrap();
    assert!(ctx.redzone_scan().unwrap().is_empty());
    let junk = [0x11u8; 40];
    // Past the end on purpose, through the raw API (the safe one refuses).
    let st = unsafe { sys::metrale_copy_h2d(ctx.as_raw(), junk.as_ptr().cast(), junk.len(), buf.as_devptr()) };
    assert_eq!(st, sys::METRALE_OK);
    let v = ctx.redzone_scan().unwrap();
    assert_eq!(v.len(), 1);
    assert_eq!((v[0].ptr, v[0].bytes, v[0].line as u32), (buf.as_devptr(), 32, line));
    assert_eq!((v[0].first_bad_offset, v[0].bad_bytes, v[0].expected, v[0].found), (0, 8, 0xA5, 0x11));
}

#[test]
fn redzone_overflow_from_a_kernel_is_reported() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(64);
    let k = ctx.kernel("test_kernels", "overflow_write").unwrap();
    let line = line!() + 1;
    let buf = ctx.alloc::<u8>(32).unwrap();
    // The planted bug: 5 bytes past the end, into the pad.
    unsafe { k.launch(1, 64).arg(&buf).arg(32u64).arg(5u64).arg(0x22u32).run().unwrap() };
    ctx.synchronize().unwrap();
    let v = ctx.redzone_scan().unwrap();
    assert_eq!(v.len(), 1, "{v:?}");
    assert_eq!((v[0].ptr, v[0].bytes, v[0].line as u32), (buf.as_devptr(), 32, line));
    assert_eq!((v[0].first_bad_offset, v[0].bad_bytes, v[0].found), (0, 5, 0x22));
}

/// Registration itself: a second module of Rust functions, one kernel
/// reading its user pointer.
#[test]
fn host_kernels_register_under_their_module() {
    let ctx = test_ctx(0);
    if skip_unless_host(&ctx, "host kernels are registered functions; a cuda context loads device code") {
        return;
    }
    unsafe extern "C" fn store_user(call: *const sys::metrale_host_kernel_call_t, user: *mut std::ffi::c_void) -> sys::metrale_status_t {
        let p: u64 = metrale_gpu::host_kernel_param(call, 0);
        *(p as *mut u64) = *(user as *const u64);
        sys::METRALE_OK
    }
    static VALUE: u64 = 0x5EED;
    let m = unsafe { ctx.register_host_kernel_with_user("mine", "store_user", store_user, &VALUE as *const u64 as *mut _, &[8]) }
        .unwrap();
    assert!(ctx.has_module("mine").unwrap());
    let mut out = ctx.alloc::<u64>(1).unwrap();
    out.memset(0).unwrap();
    unsafe { m.kernel("store_user").unwrap().launch(1, 1).arg(&out).run().unwrap() };
    assert_eq!(out.to_vec().unwrap(), vec![0x5EED]);
}

#[test]
fn pinned_memory_is_a_slice() {
    let ctx = test_ctx(0);
    let mut p = ctx.alloc_pinned::<u32>(8).unwrap();
    p.as_mut_slice().unwrap().copy_from_slice(&[5; 8]);
    let d = ctx.alloc_from(p.as_slice().unwrap()).unwrap();
    assert_eq!(d.to_vec().unwrap(), vec![5; 8]);
    p.free().unwrap();
}

#[test]
fn log_lines_reach_the_closure() {
    let lines = Arc::new(Mutex::new(Vec::<(Level, String)>::new()));
    let sink = lines.clone();
    metrale_gpu::set_log_callback(move |level, text| sink.lock().unwrap().push((level, text.to_string())));
    metrale_gpu::set_log_callback(|_, _| panic!("a panic must not cross into C"));
    {
        let ctx = test_ctx(0);
        ctx.alloc::<u8>(8).unwrap().into_raw();
        ctx.sweep_unreleased().unwrap(); // logs a warning: caught panic
    }
    let sink = lines.clone();
    metrale_gpu::set_log_callback(move |level, text| sink.lock().unwrap().push((level, text.to_string())));
    {
        let ctx = test_ctx(0);
        ctx.alloc::<u8>(8).unwrap().into_raw();
        ctx.sweep_unreleased().unwrap();
    }
    metrale_gpu::clear_log_callback();
    let got = lines.lock().unwrap();
    assert!(got.iter().any(|(l, t)| *l >= Level::Warn && t.contains(file!())), "{got:?}");
}
