//! The tour in Rust: what libmetrale_gpu tells you, as tour.c shows it.
//!
//! A context with red zones, allocations from two call sites, copies, a
//! kernel launch (a Rust host kernel on the host backend, PTX on a GPU), a
//! graph captured and replayed, a red-zone overflow planted and caught,
//! then the ledger report and the counters.
//!
//!     cargo run --offline --example tour

use metrale_gpu::{host_kernel_param, sys, Backend, Context, ContextOptions, DeviceBuffer, Kernel, Stream};
use std::ffi::c_void;
use std::process::ExitCode;

const N: usize = 4096;
const REDZONE: usize = 64;

/// add_f32 for the GPU, as PTX text (the driver JIT-compiles it).
const ADD_F32_PTX: &str = concat!(
    ".version 7.0\n.target sm_75\n.address_size 64\n",
    ".visible .entry add_f32(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pn)\n{\n",
    "  .reg .pred %p<2>; .reg .f32 %f<4>; .reg .b32 %r<4>; .reg .b64 %rd<15>;\n",
    "  ld.param.u64 %rd2, [pa]; ld.param.u64 %rd3, [pb];\n",
    "  ld.param.u64 %rd4, [pc]; ld.param.u64 %rd5, [pn];\n",
    "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mul.wide.u32 %rd6, %r1, %r2;\n",
    "  mov.u32 %r3, %tid.x; cvt.u64.u32 %rd7, %r3; add.s64 %rd1, %rd6, %rd7;\n",
    "  setp.ge.u64 %p1, %rd1, %rd5; @%p1 bra DONE;\n",
    "  cvta.to.global.u64 %rd8, %rd2; shl.b64 %rd9, %rd1, 2; add.s64 %rd10, %rd8, %rd9;\n",
    "  cvta.to.global.u64 %rd11, %rd3; add.s64 %rd12, %rd11, %rd9;\n",
    "  ld.global.f32 %f1, [%rd12]; ld.global.f32 %f2, [%rd10]; add.f32 %f3, %f2, %f1;\n",
    "  cvta.to.global.u64 %rd13, %rd4; add.s64 %rd14, %rd13, %rd9; st.global.f32 [%rd14], %f3;\n",
    "DONE:\n  ret;\n}\n\0"
);

/// add_f32 for the host backend: c[i] = a[i] + b[i] for i < n.
unsafe extern "C" fn add_f32_host(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void) -> sys::metrale_status_t {
    let (a, b, c): (u64, u64, u64) = (host_kernel_param(call, 0), host_kernel_param(call, 1), host_kernel_param(call, 2));
    let n: u64 = host_kernel_param(call, 3);
    for i in 0..n as usize {
        *(c as *mut f32).add(i) = *(a as *const f32).add(i) + *(b as *const f32).add(i);
    }
    sys::METRALE_OK
}

/// A second allocation site, so the ledger has two lines to name
/// (without #[track_caller], the site is this function's line).
fn alloc_output(ctx: &Context) -> metrale_gpu::Result<DeviceBuffer<f32>> {
    ctx.alloc(N)
}

fn load_kernel(ctx: &Context) -> metrale_gpu::Result<Kernel> {
    let module = if ctx.backend() == Backend::Host {
        ctx.register_host_kernel("tour", "add_f32", add_f32_host, &[8, 8, 8, 8])?
    } else {
        ctx.load_module_data("tour", ADD_F32_PTX.as_bytes())?
    };
    module.kernel("add_f32")
}

fn add(k: &Kernel, s: Option<&Stream>, a: &DeviceBuffer<f32>, b: &DeviceBuffer<f32>, c: &DeviceBuffer<f32>, n: u64) -> metrale_gpu::Result<()> {
    let mut launch = k.launch(n.div_ceil(256) as u32, 256).arg(a).arg(b).arg(c).arg(n);
    if let Some(s) = s {
        launch = launch.stream(s);
    }
    // SAFETY: the pointers are live buffers of N floats; n > N is the
    // planted overflow, which lands in the red zone (REDZONE >= 16 bytes).
    unsafe { launch.run() }
}

fn tour() -> metrale_gpu::Result<()> {
    metrale_gpu::set_log_callback(|level, line| eprintln!("[metrale {level:?}] {line}"));
    let ctx = Context::with_options(&ContextOptions::default().redzone_bytes(REDZONE).launch_trace(true))?;
    let info = ctx.device_info()?;
    println!("1. context on the {:?} backend: {}, {} MiB", ctx.backend(), info.name, info.total_memory >> 20);

    let mut a = ctx.alloc::<f32>(N)?;
    let mut b = ctx.alloc::<f32>(N)?;
    let mut c = alloc_output(&ctx)?;
    println!("2. three allocations of {} bytes from two call sites", N * 4);

    let ha: Vec<f32> = (0..N).map(|i| i as f32).collect();
    let hb: Vec<f32> = (0..N).map(|i| 2.0 * i as f32).collect();
    a.copy_from_host(&ha)?;
    b.copy_from_host(&hb)?;
    println!("3. copied inputs to the device");

    let k = load_kernel(&ctx)?;
    add(&k, None, &a, &b, &c, N as u64)?;
    let hc = c.to_vec()?;
    assert!(hc.iter().enumerate().all(|(i, &v)| v == 3.0 * i as f32), "c = a + b");
    println!("4. launched add_f32: c = a + b checked on the host");

    // The graph also copies c back: c is lent to the capture for the
    // graph's life, and host memory a replay writes is moved into the graph
    // and read from it once the replays are done.
    let mut stream = ctx.create_stream()?;
    let mut capture = stream.begin_capture()?;
    for _ in 0..3 {
        add(&k, Some(capture.stream()), &c, &b, &c, N as u64)?;
    }
    let lent_c = capture.lend(&mut c);
    capture.copy_to_host(lent_c, ctx.alloc_pinned::<f32>(N)?)?;
    let mut graph = capture.end()?;
    graph.launch(&stream)?;
    graph.launch(&stream)?;
    let hc = graph.host_output::<f32>(0)?;
    assert!(hc.iter().enumerate().all(|(i, &v)| v == 15.0 * i as f32), "c = a + 7b = 15i");
    drop(graph); // gives c back
    println!("5. graph of 3 launches and a copy back captured, replayed twice, checked");

    // An async copy into pinned memory: the slice waits for it to land.
    let mut pinned = ctx.alloc_pinned::<f32>(N)?;
    c.copy_to_pinned_async(&mut pinned, &stream)?;
    assert_eq!(pinned.as_slice()?[N - 1], 15.0 * (N - 1) as f32);

    add(&k, None, &a, &b, &c, N as u64 + 4)?; // the bug on purpose: 16 bytes past c
    ctx.synchronize()?;
    let v = ctx.redzone_scan()?;
    assert!(v.len() == 1 && v[0].ptr == c.as_devptr(), "the planted overflow was caught: {v:?}");
    println!(
        "6. red-zone scan caught the overflow: {:#x} ({} bytes) from {}:{}, {} bytes overwritten from pad offset {} (expected {:#04x}, found {:#04x})",
        v[0].ptr, v[0].bytes, v[0].file, v[0].line, v[0].bad_bytes, v[0].first_bad_offset, v[0].expected, v[0].found
    );

    print!("7. ledger report:\n{}", ctx.alloc_report(0, 0)?);
    let n = ctx.counters()?;
    println!(
        "8. counters: {} launches, {} graph launches, {} h2d ({} bytes), {} d2h ({} bytes), {} allocs, {} stream syncs; {} trace entries",
        n.launches, n.graph_launches, n.h2d_copies, n.h2d_bytes, n.d2h_copies, n.d2h_bytes, n.allocs, n.stream_syncs,
        ctx.launch_trace()?.len()
    );

    a.free()?;
    b.free()?;
    c.into_raw(); // given up on purpose: closing the context sweeps it and names the site
    drop((stream, k, pinned)); // every handle shares the context: close needs them gone
    ctx.close()?;
    println!("9. freed two buffers; closing the context swept the third");
    metrale_gpu::clear_log_callback();
    Ok(())
}

fn main() -> ExitCode {
    match tour() {
        Ok(()) => {
            println!("tour: ok");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("tour: FAILED: {e}");
            ExitCode::FAILURE
        }
    }
}
