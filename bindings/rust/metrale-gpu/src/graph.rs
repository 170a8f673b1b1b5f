//! Captured graphs, replayed with one call.
//!
//! A graph owns the host memory its replays write
//! ([`Capture::copy_to_host`](crate::Capture::copy_to_host) moves it in) and
//! borrows, for its lifetime `'g`, the device buffers recorded through the
//! capture. Each launch of such a graph records an event after it on
//! its stream; reading that memory ([`Graph::host_output`]) and dropping the
//! graph first wait for those events, so a replay never writes memory that
//! Rust reads or has freed.

use crate::buffer::Pod;
use crate::capture::{lent_to, Lent};
use crate::error::{check, Error, Result, Status};
use crate::pinned::PinnedHostBuffer;
use crate::shared::Shared;
use crate::stream::{Event, Stream};
use metrale_gpu_sys as sys;
use std::any::Any;
use std::marker::PhantomData;
use std::sync::{Arc, Mutex, PoisonError};

/// Host memory a capture recorded into, owned by the graph.
pub(crate) type Kept = Box<dyn Any + Send + Sync>;

/// Where the graph's replays stand, as far as its host memory is concerned.
#[derive(Default)]
struct Replays {
    /// One event per stream the graph was launched on, recorded after its
    /// latest launch there.
    after: Vec<(usize, Event)>,
    /// A launch whose end could be neither recorded nor waited for: the
    /// host memory may be written at any time, so it is never read or freed.
    lost: Option<Error>,
}

/// Work captured from a stream ([`Capture::end`](crate::Capture::end));
/// destroyed on Drop. `'g` is the borrow of the device buffers it records.
pub struct Graph<'g> {
    shared: Arc<Shared>,
    raw: *mut sys::metrale_graph_t,
    kept: Vec<Kept>,
    replays: Mutex<Replays>,
    /// The capture's id, which the buffers lent to it carry.
    id: u64,
    _borrows: PhantomData<&'g ()>,
}

// SAFETY: the library allows graph functions from any thread; the host
// memory is reached only through &mut self after the replays are waited for.
unsafe impl Send for Graph<'_> {}
unsafe impl Sync for Graph<'_> {}

impl<'g> Graph<'g> {
    pub(crate) fn new(shared: Arc<Shared>, raw: *mut sys::metrale_graph_t, kept: Vec<Kept>, id: u64) -> Graph<'g> {
        Graph { shared, raw, kept, replays: Mutex::new(Replays::default()), id, _borrows: PhantomData }
    }

    /// Host to device on `stream` into a buffer lent to this graph, between
    /// replays (`&mut self`: no launch of this graph runs meanwhile; order
    /// it after earlier launches on other streams, as any stream work).
    /// `src` may be reused on return. Capture while `stream` captures.
    pub fn copy_from_host<T: Pod>(&mut self, dst: Lent<'g, T>, src: &[T], stream: &Stream) -> Result<()> {
        lent_to(self.id, &[dst.owner])?;
        if stream.is_capturing() {
            return Err(Error::new(Status::Capture, "Graph::copy_from_host: the stream is capturing"));
        }
        dst.buf.h2d_async(src, stream)
    }

    /// Device to host from a buffer lent to this graph, on `stream`,
    /// waiting for it (`&mut self`: no launch of this graph runs meanwhile).
    pub fn copy_to_host<T: Pod>(&mut self, src: Lent<'g, T>, dst: &mut [T], stream: &Stream) -> Result<()> {
        lent_to(self.id, &[src.owner])?;
        src.buf.copy_to_host_on_stream(dst, stream)
    }

    /// Replays the graph on `stream`.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        check(unsafe { sys::metrale_graph_launch(self.shared.raw(), self.raw, stream.raw) })?;
        if self.kept.is_empty() {
            return Ok(());
        }
        let mut replays = self.replays.lock().unwrap_or_else(PoisonError::into_inner);
        let key = stream.raw as usize;
        let recorded = match replays.after.iter().position(|(s, _)| *s == key) {
            Some(i) => replays.after[i].1.record(stream),
            None => Event::create_in(&self.shared, false)
                .and_then(|e| e.record(stream).map(|()| e))
                .map(|e| replays.after.push((key, e))),
        };
        if let Err(e) = recorded {
            // The replay is enqueued but its end is unknown: wait for it here.
            if let Err(wait) = stream.synchronize() {
                replays.lost.get_or_insert(Error::new(
                    wait.status,
                    format!("a replay's end could not be recorded ({e}) nor waited for ({wait})"),
                ));
            }
        }
        Ok(())
    }

    /// Waits for every launch of this graph that wrote its host memory.
    fn wait_replays(&self) -> Result<()> {
        let mut replays = self.replays.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(e) = &replays.lost {
            return Err(e.clone());
        }
        for (_, event) in &replays.after {
            event.synchronize()?;
        }
        replays.after.clear();
        Ok(())
    }

    /// How many host buffers the graph owns, in the order they were recorded.
    pub fn host_outputs(&self) -> usize {
        self.kept.len()
    }

    /// The `index`-th host buffer moved into the capture, as its replays
    /// left it: waits for the launches first. `&mut self` keeps new
    /// launches out while the slice is borrowed. NotFound for an index past
    /// the end, InvalidArgument when `T` is not the buffer's element type.
    pub fn host_output<T: Pod>(&mut self, index: usize) -> Result<&[T]> {
        self.wait_replays()?;
        let kept = self.kept.get(index).ok_or_else(|| {
            Error::new(Status::NotFound, format!("host_output {index}: the graph owns {} host buffers", self.kept.len()))
        })?;
        if let Some(v) = kept.downcast_ref::<Vec<T>>() {
            Ok(v)
        } else if let Some(b) = kept.downcast_ref::<Box<[T]>>() {
            Ok(b)
        } else if let Some(p) = kept.downcast_ref::<PinnedHostBuffer<T>>() {
            p.as_slice()
        } else {
            Err(Error::new(
                Status::InvalidArgument,
                format!("host_output {index}: the buffer does not hold {}", std::any::type_name::<T>()),
            ))
        }
    }

    fn release(&mut self) -> Result<()> {
        let waited = self.wait_replays();
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        let destroyed = check(unsafe { sys::metrale_graph_destroy(self.shared.raw(), raw) });
        if waited.is_err() {
            // A replay may still write it: leaked rather than freed.
            std::mem::take(&mut self.kept).into_iter().for_each(std::mem::forget);
        }
        waited.and(destroyed)
    }

    /// Destroys now and reports the status (Drop ignores it).
    pub fn destroy(mut self) -> Result<()> {
        self.release()
    }
}

impl Drop for Graph<'_> {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let _ = self.release();
        }
    }
}

impl std::fmt::Debug for Graph<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({:p}, {} host buffers)", self.raw, self.kept.len())
    }
}
