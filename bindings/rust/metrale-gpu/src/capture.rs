//! Recording a stream's work into a graph.
//!
//! A [`Capture`] holds `&mut Stream` while it is open, so nothing else can
//! put work on the stream, and the buffers a graph will write or read at
//! every replay are recorded through it: device buffers are lent to it
//! (`&'g mut`) for as long as the graph lives, and host memory a replay
//! writes is moved into the graph. The buffers' own async calls refuse a
//! capturing stream.

use crate::buffer::{DeviceBuffer, Pod};
use crate::buffer_async::{Copy2d, GraphHostMemory};
use crate::error::{check, Error, Result, Status};
use crate::graph::{Graph, Kept};
use crate::stream::Stream;
use metrale_gpu_sys as sys;
use std::marker::PhantomData;
use std::sync::atomic::{AtomicU64, Ordering};

/// An open capture of a stream ([`Stream::begin_capture`]). Work put on
/// [`Capture::stream`] (kernel launches) and recorded through the methods
/// below is replayed by the graph that [`Capture::end`] returns; dropping
/// the capture aborts it. `'g` is how long the graph may live: a buffer is
/// recorded by lending it to the capture ([`Capture::lend`] takes
/// `&'g mut`), so nothing else reads or writes it while the graph can
/// replay.
///
/// ```compile_fail,E0502
/// # use metrale_gpu::{Backend, Context, ContextOptions};
/// # let ctx = Context::with_options(&ContextOptions::default().backend(Backend::Host)).unwrap();
/// let mut buf = ctx.alloc::<u32>(64).unwrap();
/// let mut s = ctx.create_stream().unwrap();
/// let mut cap = s.begin_capture().unwrap();
/// let lent = cap.lend(&mut buf);
/// cap.memset(lent, 0).unwrap();
/// let graph = cap.end().unwrap();
/// let v = buf.to_vec(); // the graph writes buf at every replay: no reader meanwhile
/// graph.launch(&s).unwrap();
/// ```
pub struct Capture<'s, 'g> {
    stream: &'s mut Stream,
    /// Names this capture and its graph in the buffers lent to it.
    id: u64,
    kept: Vec<Kept>,
    open: bool,
    _borrows: PhantomData<&'g ()>,
}

/// A device buffer lent to a capture for the life `'g` of its graph
/// ([`Capture::lend`]): it names the buffer in the recording calls, as often
/// as needed, for reading and writing. It gives no access to the buffer's
/// contents (the graph's replays own them); [`Lent::as_devptr`] is its
/// address, for kernel arguments.
pub struct Lent<'g, T: Pod> {
    pub(crate) buf: &'g DeviceBuffer<T>,
    pub(crate) owner: u64,
}

impl<T: Pod> Clone for Lent<'_, T> {
    fn clone(&self) -> Self {
        *self
    }
}
impl<T: Pod> Copy for Lent<'_, T> {}

impl<T: Pod> Lent<'_, T> {
    /// The buffer's device address (for `Launch::arg`).
    pub fn as_devptr(&self) -> sys::metrale_devptr_t {
        self.buf.as_devptr()
    }
    /// The buffer's length in elements.
    pub fn len(&self) -> usize {
        self.buf.len()
    }
    /// True for a buffer of no elements.
    pub fn is_empty(&self) -> bool {
        self.buf.is_empty()
    }
}

impl<T: Pod> std::fmt::Debug for Lent<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Lent({:?})", self.buf)
    }
}

/// InvalidArgument unless every buffer was lent to capture `id`.
pub(crate) fn lent_to(id: u64, owners: &[u64]) -> Result<()> {
    if owners.iter().any(|&o| o != id) {
        return Err(Error::new(Status::InvalidArgument, "the buffer was lent to another capture"));
    }
    Ok(())
}

fn distinct<T: Pod>(what: &str, dst: Lent<'_, T>, src: Lent<'_, T>) -> Result<()> {
    if dst.buf.as_devptr() == src.buf.as_devptr() {
        return Err(Error::new(Status::InvalidArgument, format!("{what}: the source and the destination are one buffer")));
    }
    Ok(())
}

impl<'s, 'g> Capture<'s, 'g> {
    pub(crate) fn new(stream: &'s mut Stream) -> Self {
        static NEXT: AtomicU64 = AtomicU64::new(1);
        stream.set_captured_from_rust(true);
        let id = NEXT.fetch_add(1, Ordering::Relaxed);
        Capture { stream, id, kept: Vec::new(), open: true, _borrows: PhantomData }
    }

    /// The capturing stream, for kernel launches (`Launch::stream`).
    pub fn stream(&self) -> &Stream {
        self.stream
    }

    /// Lends `buf` to the graph for its whole life: until the graph is
    /// dropped, `buf` can be neither read nor written by anything else.
    pub fn lend<T: Pod>(&mut self, buf: &'g mut DeviceBuffer<T>) -> Lent<'g, T> {
        Lent { buf, owner: self.id }
    }

    /// Records a host-to-device copy of `src` into the start of `dst`. The
    /// library copies `src` now into memory the graph owns, so `src` may be
    /// dropped at once; every replay writes those bytes.
    pub fn copy_from_host<T: Pod>(&mut self, dst: Lent<'g, T>, src: &[T]) -> Result<()> {
        self.mine(&[dst.owner])?;
        dst.buf.h2d_async(src, self.stream)
    }

    /// Records a device-to-device copy of all of `src` into `dst`.
    pub fn copy<T: Pod>(&mut self, dst: Lent<'g, T>, src: Lent<'g, T>) -> Result<()> {
        self.mine(&[dst.owner, src.owner])?;
        distinct("Capture::copy", dst, src)?;
        dst.buf.d2d_async(src.buf, self.stream)
    }

    /// Records a pitched 2D copy from `src` into `dst`.
    pub fn copy_2d<T: Pod>(&mut self, dst: Lent<'g, T>, src: Lent<'g, T>, shape: Copy2d) -> Result<()> {
        self.mine(&[dst.owner, src.owner])?;
        distinct("Capture::copy_2d", dst, src)?;
        dst.buf.d2d_2d_async(src.buf, shape, self.stream)
    }

    /// Records a memset of every byte of `dst`.
    pub fn memset<T: Pod>(&mut self, dst: Lent<'g, T>, value: u8) -> Result<()> {
        self.mine(&[dst.owner])?;
        dst.buf.memset_on(value, self.stream)
    }

    /// Records a device-to-host copy of the first `dst`-length elements of
    /// `src` into `dst`, which moves into the graph: every replay writes
    /// it, and [`Graph::host_output`] reads it after waiting for the
    /// replays. `dst` is dropped if the call fails.
    pub fn copy_to_host<T: Pod, H: GraphHostMemory<T>>(&mut self, src: Lent<'g, T>, dst: H) -> Result<()> {
        self.mine(&[src.owner])?;
        let dst = src.buf.d2h_into_graph(dst, self.stream)?;
        self.kept.push(dst);
        Ok(())
    }

    fn mine(&self, owners: &[u64]) -> Result<()> {
        lent_to(self.id, owners)
    }

    fn close(&mut self, end: bool) -> Result<Option<*mut sys::metrale_graph_t>> {
        self.open = false;
        let (c, s) = (self.stream.shared.raw(), self.stream.raw);
        let ended = if end {
            let mut g = std::ptr::null_mut();
            check(unsafe { sys::metrale_graph_end_capture(c, s, &mut g) }).map(|()| Some(g))
        } else {
            Ok(None)
        };
        if ended.is_err() || !end {
            // Whatever the end left open is dropped, so no replay can exist
            // that Rust does not own.
            let aborted = check(unsafe { sys::metrale_graph_abort_capture(c, s) });
            if !end {
                self.stream.set_captured_from_rust(false);
                return aborted.map(|()| None);
            }
        }
        self.stream.set_captured_from_rust(false);
        ended
    }

    /// Ends the capture and instantiates the graph, which takes the host
    /// memory recorded into it.
    pub fn end(mut self) -> Result<Graph<'g>> {
        let raw = self.close(true)?.expect("an ended capture has a graph");
        let kept = std::mem::take(&mut self.kept);
        Ok(Graph::new(self.stream.shared.clone(), raw, kept, self.id))
    }

    /// Drops the capture and what it recorded (Drop does the same and
    /// ignores the status).
    pub fn abort(mut self) -> Result<()> {
        self.close(false).map(|_| ())
    }
}

impl Drop for Capture<'_, '_> {
    fn drop(&mut self) {
        if self.open {
            let _ = self.close(false);
        }
    }
}

impl std::fmt::Debug for Capture<'_, '_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Capture({:?}, {} host buffers)", self.stream, self.kept.len())
    }
}
