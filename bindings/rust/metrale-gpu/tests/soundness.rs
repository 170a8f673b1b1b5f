//! The undefined behaviour issue 12 reproduced with safe code, each case
//! now a defined result: the host memory a capture records, the context's
//! lifetime under its handles, memory pinned elsewhere. The rules that are
//! enforced at compile time have `compile_fail` doc tests in
//! `src/soundness.rs`.

mod common;

use common::{capture_or_scan_lock, test_ctx};
use metrale_gpu::{Copy2d, Level, Status};
use std::sync::{Arc, Mutex};

/// Was: the replay read the dropped Vec. The library copies the source at
/// the call, so the graph replays the bytes the Vec held then.
#[test]
fn captured_host_copy_outlives_its_source() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let mut buf = ctx.alloc::<u32>(256).unwrap();
    let mut s = ctx.create_stream().unwrap();
    let mut cap = s.begin_capture().unwrap();
    assert_eq!(buf.copy_from_host_async(&[1], cap.stream()).unwrap_err().status, Status::Capture);
    assert_eq!(buf.memset_async(0, cap.stream()).unwrap_err().status, Status::Capture);
    let dst = cap.lend(&mut buf);
    let src: Vec<u32> = (0..256).collect();
    cap.copy_from_host(dst, &src).unwrap();
    drop(src);
    let noise = vec![0xDEADu32; 256]; // likely reuses the freed block
    cap.copy_to_host(dst, vec![0u32; 256]).unwrap();
    let mut g = cap.end().unwrap();
    let want: Vec<u32> = (0..256).collect();
    for _ in 0..2 {
        g.copy_from_host(dst, &[7u32; 256], &s).unwrap(); // between replays, through the graph
        g.launch(&s).unwrap();
        assert_eq!(g.host_output::<u32>(0).unwrap(), &want[..]);
        let mut back = vec![0u32; 256];
        g.copy_to_host(dst, &mut back, &s).unwrap();
        assert_eq!(back, want);
    }
    drop(g);
    assert_eq!(buf.to_vec().unwrap(), want, "the graph gave the buffer back");
    drop(noise);
}

/// A buffer lent to one capture names nothing in another.
#[test]
fn lent_buffers_belong_to_their_capture() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let (mut a, mut b) = (ctx.alloc::<u8>(16).unwrap(), ctx.alloc::<u8>(16).unwrap());
    let (mut s1, mut s2) = (ctx.create_stream().unwrap(), ctx.create_stream().unwrap());
    let mut c1 = s1.begin_capture().unwrap();
    let mut c2 = s2.begin_capture().unwrap();
    let la = c1.lend(&mut a);
    let lb = c2.lend(&mut b);
    assert_eq!(c2.memset(la, 0).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(c2.copy(lb, la).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(c2.copy(lb, lb).unwrap_err().status, Status::InvalidArgument, "one buffer both ways");
    c1.memset(la, 1).unwrap();
    c2.memset(lb, 2).unwrap();
    let mut g1 = c1.end().unwrap();
    let g2 = c2.end().unwrap();
    assert_eq!(g1.copy_from_host(lb, &[0u8; 16], &s1).unwrap_err().status, Status::InvalidArgument);
    g1.launch(&s1).unwrap();
    g2.launch(&s2).unwrap();
    let mut back = [0u8; 16];
    g1.copy_to_host(la, &mut back, &s1).unwrap();
    assert_eq!(back, [1u8; 16]);
    drop((g1, g2));
    assert_eq!(b.to_vec().unwrap(), vec![2u8; 16]);
}

/// Was: a failed `to_vec()` during a capture still replayed a write into
/// the freed Vec. A copy that must wait fails with Capture and records
/// nothing; the borrowed-memory async copy refuses a capturing stream.
#[test]
fn failed_host_copies_during_capture_record_nothing() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let buf = ctx.alloc_from(&[9u32; 64]).unwrap();
    let mut pinned = ctx.alloc_pinned::<u32>(64).unwrap();
    let mut s = ctx.create_stream().unwrap();
    let cap = s.begin_capture().unwrap();
    let mut v = vec![0u32; 64];
    assert_eq!(buf.copy_to_host_on_stream(&mut v, cap.stream()).unwrap_err().status, Status::Capture);
    assert_eq!(buf.copy_to_pinned_async(&mut pinned, cap.stream()).unwrap_err().status, Status::Capture);
    drop(v);
    let mut g = cap.end().unwrap();
    assert_eq!(g.host_outputs(), 0);
    let before = ctx.counters().unwrap();
    g.launch(&s).unwrap();
    s.synchronize().unwrap();
    let after = ctx.counters().unwrap();
    assert_eq!(after.d2h_copies, before.d2h_copies, "the replay copies nothing to the host");
    assert_eq!(pinned.as_slice().unwrap(), &[0u32; 64][..]);
    assert_eq!(g.host_output::<u32>(0).unwrap_err().status, Status::NotFound);
}

/// Host memory the replays write is moved into the graph and read back
/// after them, launch after launch.
#[test]
fn device_to_host_in_a_graph_writes_memory_the_graph_owns() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let mut buf = ctx.alloc_from(&[1u32; 32]).unwrap();
    let mut src = ctx.alloc::<u32>(32).unwrap();
    let mut s = ctx.create_stream().unwrap();
    let mut cap = s.begin_capture().unwrap();
    let (d, from) = (cap.lend(&mut buf), cap.lend(&mut src));
    cap.copy(d, from).unwrap();
    cap.copy_to_host(d, vec![0u32; 32]).unwrap();
    cap.copy_to_host(d, ctx.alloc_pinned::<u32>(16).unwrap()).unwrap();
    let too_long = vec![0u32; 33];
    assert_eq!(cap.copy_to_host(d, too_long).unwrap_err().status, Status::InvalidArgument);
    let mut g = cap.end().unwrap();
    assert_eq!(g.host_outputs(), 2);
    for value in [5u32, 6] {
        g.copy_from_host(from, &[value; 32], &s).unwrap();
        g.launch(&s).unwrap();
        assert_eq!(g.host_output::<u32>(0).unwrap(), &[value; 32][..]);
        assert_eq!(g.host_output::<u32>(1).unwrap(), &[value; 16][..]);
    }
    assert_eq!(g.host_output::<u64>(0).unwrap_err().status, Status::InvalidArgument);
    g.launch(&s).unwrap();
    drop(g); // waits for the replay before freeing what it writes
    s.synchronize().unwrap();
}

/// Capture state changes only under &mut, which a second `Stream` value of
/// the default stream would escape; events recorded into a capture would
/// let other streams join it.
#[test]
fn capture_is_refused_where_rust_could_not_track_it() {
    let _serial = capture_or_scan_lock();
    let ctx = test_ctx(0);
    let mut d = ctx.default_stream().unwrap();
    assert_eq!(d.begin_capture().unwrap_err().status, Status::InvalidArgument);
    assert!(!d.is_capturing());
    let mut s = ctx.create_stream().unwrap();
    let e = ctx.create_event(false).unwrap();
    let cap = s.begin_capture().unwrap();
    assert_eq!(e.record(cap.stream()).unwrap_err().status, Status::Capture);
    cap.abort().unwrap();
    assert!(!s.is_capturing());
    drop(s.begin_capture().unwrap()); // Drop aborts too
    assert!(!s.is_capturing());
    e.record(&s).unwrap();
    e.synchronize().unwrap();
}

/// Was: the context could be closed under live buffers, which then failed
/// and were reported as leaks. Now the last owner closes it, and nothing a
/// buffer owns is swept.
#[test]
fn dropping_the_context_leaves_its_handles_working_and_nothing_reported() {
    let lines = Arc::new(Mutex::new(Vec::<String>::new()));
    let sink = lines.clone();
    metrale_gpu::set_log_callback(move |level, text| {
        if level >= Level::Warn {
            sink.lock().unwrap().push(text.to_string())
        }
    });
    let ctx = test_ctx(0);
    let mut buf = ctx.alloc::<u64>(8).unwrap();
    let s = ctx.create_stream().unwrap();
    drop(ctx);
    buf.copy_from_host_async(&[4u64; 8], &s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![4; 8]);
    drop(s);
    drop(buf); // the last owner: the context is destroyed now, with nothing live
    metrale_gpu::clear_log_callback();
    let got = lines.lock().unwrap();
    assert!(!got.iter().any(|l| l.contains("still live")), "{got:?}");
}

/// Was: memory pinned by another context, reached as a slice, was copied
/// as pageable and the call returned while the DMA still read it. The
/// library asks who pinned it and waits; the crate passes the slice as is.
#[test]
fn memory_pinned_elsewhere_is_waited_for() {
    let (a, b) = (test_ctx(0), test_ctx(0));
    let mut buf = a.alloc::<u32>(1024).unwrap();
    let s = a.create_stream().unwrap();
    let waits = |ctx: &metrale_gpu::Context| ctx.counters().unwrap().pinned_source_waits;
    buf.copy_from_host_async(&vec![1u32; 1024], &s).unwrap();
    assert_eq!(waits(&a), 0, "pageable memory: no wait");

    let mut pinned = b.alloc_pinned::<u32>(1024).unwrap();
    pinned.as_mut_slice().unwrap().fill(2);
    buf.copy_from_host_async(pinned.as_slice().unwrap(), &s).unwrap();
    assert_eq!(waits(&a), 1, "pinned by another context: the copy waited");

    let mut mine = vec![3u32; 1024];
    let reg = b.register_host(&mut mine).unwrap();
    buf.copy_from_host_async(&reg, &s).unwrap();
    assert_eq!(waits(&a), 2, "registered by another context: the copy waited");
    drop(reg);
    s.synchronize().unwrap();
    assert_eq!(buf.to_vec().unwrap(), vec![3; 1024]);
}

/// d2h_async into pinned memory: the slice waits for the copy.
#[test]
fn async_copy_to_pinned_memory_is_read_after_it_lands() {
    let ctx = test_ctx(0);
    let buf = ctx.alloc_from(&(0..4096u32).collect::<Vec<_>>()).unwrap();
    let s = ctx.create_stream().unwrap();
    let mut pinned = ctx.alloc_pinned::<u32>(4096).unwrap();
    buf.copy_to_pinned_async(&mut pinned, &s).unwrap();
    assert_eq!(pinned.as_slice().unwrap(), &(0..4096u32).collect::<Vec<_>>()[..]);
    let mut long = ctx.alloc_pinned::<u32>(4097).unwrap();
    assert_eq!(buf.copy_to_pinned_async(&mut long, &s).unwrap_err().status, Status::InvalidArgument);
    buf.copy_to_pinned_async(&mut pinned, &s).unwrap();
    pinned.free().unwrap(); // waits for the copy first
}

/// Two writers take turns through a Mutex: the shape `&mut` asks for.
#[test]
fn writers_on_two_threads_share_a_buffer_through_a_mutex() {
    let ctx = test_ctx(0);
    let buf = Mutex::new(ctx.alloc::<u32>(1024).unwrap());
    let streams = [ctx.create_stream().unwrap(), ctx.create_stream().unwrap()];
    std::thread::scope(|t| {
        for (i, s) in streams.iter().enumerate() {
            let buf = &buf;
            t.spawn(move || {
                let src = vec![i as u32 + 1; 1024];
                for _ in 0..50 {
                    let mut b = buf.lock().unwrap();
                    b.copy_from_host_async(&src, s).unwrap();
                    s.synchronize().unwrap();
                }
            });
        }
    });
    let v = buf.into_inner().unwrap().to_vec().unwrap();
    assert!(v.iter().all(|&x| x == v[0]) && (v[0] == 1 || v[0] == 2), "one writer's bytes, whole");
}

#[test]
fn arena_memory_is_off_the_ledger_and_freed_on_drop() {
    let ctx = test_ctx(0);
    let mut arena = ctx.alloc_arena::<u16>(100).unwrap();
    assert!(arena.is_arena());
    assert_eq!(ctx.live_count().unwrap(), 0);
    arena.copy_from_host(&[7u16; 100]).unwrap();
    assert_eq!(arena.to_vec().unwrap(), vec![7; 100]);
    assert_eq!(ctx.alloc_arena::<u16>(0).unwrap_err().status, Status::InvalidArgument);
    assert_eq!(ctx.sweep_unreleased().unwrap(), 0, "an arena is not a ledger buffer");
    arena.free().unwrap();
}

#[test]
fn copy_2d_moves_rows_and_checks_both_extents() {
    let ctx = test_ctx(0);
    let s = ctx.create_stream().unwrap();
    // 4 rows of 8, copy a 3-wide column block into rows of 4.
    let src = ctx.alloc_from(&(0..32u32).collect::<Vec<_>>()).unwrap();
    let mut dst = ctx.alloc_from(&[0u32; 16]).unwrap();
    let shape = Copy2d { width: 3, height: 4, src_pitch: 8, dst_pitch: 4 };
    dst.copy_2d_from_async(&src, shape, &s).unwrap();
    s.synchronize().unwrap();
    assert_eq!(dst.to_vec().unwrap(), vec![0, 1, 2, 0, 8, 9, 10, 0, 16, 17, 18, 0, 24, 25, 26, 0]);
    let bad = |shape: Copy2d, dst: &mut metrale_gpu::DeviceBuffer<u32>| {
        dst.copy_2d_from_async(&src, shape, &s).unwrap_err().status
    };
    assert_eq!(bad(Copy2d { height: 5, ..shape }, &mut dst), Status::InvalidArgument, "past the source");
    assert_eq!(bad(Copy2d { dst_pitch: 5, ..shape }, &mut dst), Status::InvalidArgument, "past the destination");
    assert_eq!(bad(Copy2d { width: 9, ..shape }, &mut dst), Status::InvalidArgument, "wider than the pitch");
    assert_eq!(bad(Copy2d { height: usize::MAX, ..shape }, &mut dst), Status::InvalidArgument, "overflow");
    assert_eq!(ctx.counters().unwrap().d2d_bytes, 12 * 4);
}

#[test]
fn registered_memory_is_unregistered_on_drop() {
    let ctx = test_ctx(0);
    let mut v = vec![1u64; 512];
    let reg = ctx.register_host(&mut v).unwrap();
    assert_eq!(reg.len(), 512);
    let d = ctx.alloc_from(&reg).unwrap();
    assert_eq!(d.to_vec().unwrap(), vec![1; 512]);
    drop(reg);
    let again = ctx.register_host(&mut v).unwrap(); // the first was unregistered
    again.unregister().unwrap();
    let mut empty: [u64; 0] = [];
    assert_eq!(ctx.register_host(&mut empty).unwrap_err().status, Status::InvalidArgument);
}
