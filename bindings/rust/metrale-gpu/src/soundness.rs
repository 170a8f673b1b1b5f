//! The rules that keep safe code free of undefined behaviour, each with a
//! test that fails to compile when the rule is broken (the `compile_fail`
//! examples below run with `cargo test`, as the runtime tests in
//! `tests/soundness.rs` do).
//!
//! # 1. Writes need `&mut`
//!
//! Every call that writes a [`DeviceBuffer`](crate::DeviceBuffer) (copies
//! into it, memsets, async or not) takes `&mut self`, so two threads cannot
//! write one buffer at once, nor one write while another reads. Sharing a
//! buffer between threads for writing takes a `Mutex`, as for any value.
//!
//! ```compile_fail,E0596
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let buf = ctx.alloc::<u32>(4).unwrap();
//! let shared = &buf;
//! shared.memset(0).unwrap(); // a write through & does not compile
//! ```
//!
//! ```compile_fail,E0499
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let (s1, s2) = (ctx.create_stream().unwrap(), ctx.create_stream().unwrap());
//! let mut buf = ctx.alloc::<u32>(1024).unwrap();
//! let (a, b) = (vec![1u32; 1024], vec![2u32; 1024]);
//! std::thread::scope(|t| {
//!     t.spawn(|| buf.copy_from_host_async(&a, &s1).unwrap());
//!     t.spawn(|| buf.copy_from_host_async(&b, &s2).unwrap()); // two writers
//! });
//! ```
//!
//! # 2. Handles own their context
//!
//! Buffers, pinned memory, streams, events, graphs, modules and kernels
//! each hold a share of their [`Context`](crate::Context): the library's
//! context is destroyed when the last share goes, never under a live
//! handle, and [`Context::close`](crate::Context::close) with handles left
//! destroys nothing and says how many remain. Only an owner can close.
//!
//! ```compile_fail,E0505
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let handle = &ctx; // a handle that merely borrows the context...
//! ctx.close().unwrap(); // ...keeps it from being closed
//! println!("{:?}", handle.backend());
//! ```
//!
//! A handle that could reach its context only by a borrow would be closed
//! under; the ones this crate hands out are `'static`, owning their share:
//!
//! ```
//! # use metrale_gpu::{Backend, Context, ContextOptions, DeviceBuffer};
//! fn outlives<T: 'static>(_: &T) {}
//! let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let buf: DeviceBuffer<u8> = ctx.alloc(8).unwrap();
//! outlives(&buf);
//! assert!(ctx.close().is_err(), "the buffer still holds the context");
//! assert_eq!(buf.to_vec().unwrap().len(), 8, "and the buffer still works");
//! ```
//!
//! # 3. What a graph replays is the graph's
//!
//! A capture is a [`Capture`](crate::Capture), which holds `&mut Stream`
//! while it is open; the buffers' own async calls refuse a capturing stream,
//! so a graph records memory only through the capture:
//! - a device buffer is lent to it ([`Capture::lend`](crate::Capture::lend)
//!   takes `&'g mut`) for as long as the graph lives, so no other code reads
//!   or writes it while a replay may (between replays the graph itself
//!   copies into and out of it, under `&mut Graph`);
//! - a host-to-device copy from `&[T]` is read at the call (the library
//!   copies it into memory the graph owns), so the slice may go at once;
//! - host memory that a replay writes is moved into the graph
//!   ([`Capture::copy_to_host`](crate::Capture::copy_to_host) takes it by
//!   value), and [`Graph::host_output`](crate::Graph::host_output) reads it
//!   after waiting for the replays; the graph's Drop waits for them too.
//!
//! ```compile_fail,E0277
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let mut buf = ctx.alloc_from(&[1u32; 64]).unwrap();
//! let mut s = ctx.create_stream().unwrap();
//! let mut out = vec![0u32; 64];
//! let mut cap = s.begin_capture().unwrap();
//! let lent = cap.lend(&mut buf);
//! cap.copy_to_host(lent, &mut out).unwrap(); // a borrow of host memory is not ownership
//! ```
//!
//! ```compile_fail,E0382
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let mut buf = ctx.alloc_from(&[1u32; 64]).unwrap();
//! let mut s = ctx.create_stream().unwrap();
//! let out = vec![0u32; 64];
//! let mut cap = s.begin_capture().unwrap();
//! let lent = cap.lend(&mut buf);
//! cap.copy_to_host(lent, out).unwrap();
//! let g = cap.end().unwrap();
//! println!("{}", out[0]); // moved into the graph: not the caller's any more
//! ```
//!
//! ```compile_fail,E0499
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let mut buf = ctx.alloc::<u32>(64).unwrap();
//! let mut s = ctx.create_stream().unwrap();
//! let mut cap = s.begin_capture().unwrap();
//! let lent = cap.lend(&mut buf);
//! cap.memset(lent, 0).unwrap();
//! let g = cap.end().unwrap();
//! buf.memset(1).unwrap(); // lent to the graph: nobody else writes it while it lives
//! g.launch(&s).unwrap();
//! ```
//!
//! ```compile_fail,E0502
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let mut s = ctx.create_stream().unwrap();
//! let cap = s.begin_capture().unwrap();
//! s.synchronize().unwrap(); // the capture holds the stream
//! cap.abort().unwrap();
//! ```
//!
//! # 4. Pinned memory is asked about, and written only when nobody reads
//!
//! Whether host memory is pinned (and so read by DMA after an async call)
//! is the library's question to the driver, whoever pinned it: this crate
//! never guesses from the type. Memory an async copy writes later is a
//! [`PinnedHostBuffer`](crate::PinnedHostBuffer) taken by `&mut`: no slice
//! of it can be alive during the copy, and its slices, `free` and Drop wait
//! for the copy first.
//!
//! ```compile_fail,E0308
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! # let s = ctx.create_stream().unwrap();
//! let buf = ctx.alloc_from(&[7u32; 16]).unwrap();
//! let mut out = vec![0u32; 16];
//! buf.copy_to_pinned_async(&mut out, &s).unwrap(); // pageable memory is not a pinned buffer
//! ```
//!
//! ```compile_fail,E0308
//! # use metrale_gpu::{Backend, Context, ContextOptions};
//! # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
//! let pinned = ctx.alloc_pinned::<u32>(16).unwrap();
//! let as_slice: &[u32] = &pinned; // no Deref: a bare slice could not wait for a copy
//! ```
