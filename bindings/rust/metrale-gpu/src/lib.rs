//! Safe Rust API over libmetrale_gpu, a GPU runtime whose allocation ledger
//! names the line of your code that holds the memory, whose red zones catch
//! kernels writing past their buffers, and whose errors say what the driver
//! said.
//!
//! Allocation and kernel-lookup sites are the caller's own lines
//! (`#[track_caller]`), so the ledger points at your code, not at this crate.
//!
//! ```
//! use metrale_gpu::{Backend, Context, ContextOptions};
//!
//! # fn main() -> Result<(), metrale_gpu::Error> {
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host))?;
//! let buf = ctx.alloc_from(&[1u32, 2, 3, 4])?;       // this line is on the ledger
//! assert_eq!(buf.to_vec()?, vec![1, 2, 3, 4]);
//!
//! let live = ctx.live_allocations()?;
//! assert_eq!(live[0].bytes, 16);
//! assert!(live[0].file.ends_with(".rs"));
//! println!("{}", ctx.alloc_report(0, 0)?);
//! # Ok(())
//! # }
//! ```
//!
//! A host kernel written in Rust, launched with packed arguments:
//!
//! ```
//! use metrale_gpu::{host_kernel_param, sys, Backend, Context, ContextOptions};
//! use std::ffi::c_void;
//!
//! unsafe extern "C" fn fill_u32(call: *const sys::metrale_host_kernel_call_t, _: *mut c_void)
//!     -> sys::metrale_status_t {
//!     let p: u64 = host_kernel_param(call, 0);
//!     let value: u32 = host_kernel_param(call, 1);
//!     let n: u64 = host_kernel_param(call, 2);
//!     std::slice::from_raw_parts_mut(p as *mut u32, n as usize).fill(value);
//!     sys::METRALE_OK
//! }
//!
//! # fn main() -> Result<(), metrale_gpu::Error> {
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host))?;
//! ctx.register_host_kernel("demo", "fill_u32", fill_u32, &[8, 4, 8])?;
//! let k = ctx.kernel("demo", "fill_u32")?;
//! let buf = ctx.alloc::<u32>(256)?;
//! unsafe { k.launch(1, 256).arg(&buf).arg(7u32).arg(256u64).run()? };
//! assert!(buf.to_vec()?.iter().all(|&v| v == 7));
//! # Ok(())
//! # }
//! ```
//!
//! What keeps safe code free of undefined behaviour is set out, with a test
//! for each rule, in [`soundness`].
#![deny(missing_docs)]

mod buffer;
mod buffer_async;
mod capture;
mod context;
mod counters;
mod error;
mod graph;
mod kernel;
mod launch;
mod layout;
mod ledger;
mod log;
mod pack;
mod pinned;
mod registered;
mod shared;
pub mod soundness;
mod stream;
mod util;

pub use buffer::{DeviceBuffer, Pod};
pub use buffer_async::{Copy2d, GraphHostMemory};
pub use capture::{Capture, Lent};
pub use context::{Backend, Context, ContextOptions, HostKernelFn};
pub use counters::Counters;
pub use error::{Error, Result, Status};
pub use graph::Graph;
pub use kernel::{host_kernel_param, Dim3, Kernel, Module};
pub use launch::{KernelArg, Launch};
pub use ledger::{AllocKind, Allocation, DeviceInfo, KernelAuditEntry, KernelTiming, RedzoneViolation, TraceEntry, TraceKind};
pub use log::{clear_log_callback, set_log_callback, set_log_level, Level};
pub use metrale_gpu_sys as sys;
pub use pack::{PackedArgs, Param};
pub use pinned::PinnedHostBuffer;
pub use registered::RegisteredHost;
pub use stream::{Event, Stream};

/// The library's version (major, minor, patch).
pub fn version() -> (i32, i32, i32) {
    let (mut a, mut b, mut c) = (0, 0, 0);
    // SAFETY: valid out-pointers; always OK.
    unsafe { sys::metrale_version(&mut a, &mut b, &mut c) };
    (a, b, c)
}
