//! Stream-ordered work on device buffers: async copies, memsets, the 2D
//! copy, and the device-to-host copy into pinned memory that returns before
//! the data has arrived. The `pub(crate)` forms are what a
//! [`Capture`](crate::Capture) records through.
//!
//! Host memory given as `&[T]` is read before the call returns: the library
//! waits for the copy when the source is pinned by anyone in the process
//! (it asks the driver, rule 7 of the header) and copies it into memory the
//! graph owns while the stream captures (rule 3). Nothing here guesses
//! whether memory is pinned.

use crate::buffer::{bytes_of, size_mismatch, DeviceBuffer, Pod};
use crate::error::{Error, Result, Status};
use crate::graph::Kept;
use crate::pinned::{Pending, PinnedHostBuffer};
use crate::shared::Shared;
use crate::stream::{Event, Stream};
use metrale_gpu_sys as sys;

/// The shape of a pitched 2D copy, in elements: `height` rows of `width`
/// elements, rows `src_pitch` apart in the source and `dst_pitch` apart in
/// the destination.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Copy2d {
    /// Elements per row copied.
    pub width: usize,
    /// Rows copied.
    pub height: usize,
    /// Elements from one source row to the next (at least `width`).
    pub src_pitch: usize,
    /// Elements from one destination row to the next (at least `width`).
    pub dst_pitch: usize,
}

/// Host memory a graph can own: moved into the capture
/// ([`Capture::copy_to_host`](crate::Capture::copy_to_host)), written by
/// every replay, read back with [`Graph::host_output`](crate::Graph::host_output).
/// Implemented for `Vec<T>`, `Box<[T]>` and [`PinnedHostBuffer<T>`].
pub trait GraphHostMemory<T: Pod>: Send + Sync + 'static + sealed::Sealed {
    /// Where the replays write, and how many elements.
    #[doc(hidden)]
    fn target(&mut self) -> Result<(*mut T, usize)>;
}

mod sealed {
    pub trait Sealed {}
    impl<T: crate::Pod> Sealed for Vec<T> {}
    impl<T: crate::Pod> Sealed for Box<[T]> {}
    impl<T: crate::Pod> Sealed for crate::PinnedHostBuffer<T> {}
}

impl<T: Pod> GraphHostMemory<T> for Vec<T> {
    fn target(&mut self) -> Result<(*mut T, usize)> {
        Ok((self.as_mut_ptr(), self.len()))
    }
}
impl<T: Pod> GraphHostMemory<T> for Box<[T]> {
    fn target(&mut self) -> Result<(*mut T, usize)> {
        Ok((self.as_mut_ptr(), self.len()))
    }
}
impl<T: Pod> GraphHostMemory<T> for PinnedHostBuffer<T> {
    fn target(&mut self) -> Result<(*mut T, usize)> {
        Ok((self.dma_target()?, self.len()))
    }
}

/// Bytes of `shape.height` rows `pitch` apart, the last `width` long, when
/// they fit in `len` elements.
fn extent_2d<T>(what: &str, shape: &Copy2d, pitch: usize, len: usize) -> Result<usize> {
    if shape.width > pitch {
        return Err(Error::new(Status::InvalidArgument, format!("{what}: width {} exceeds the pitch {pitch}", shape.width)));
    }
    let need = match shape.height {
        0 => 0,
        h => (h - 1)
            .checked_mul(pitch)
            .and_then(|n| n.checked_add(shape.width))
            .ok_or_else(|| Error::new(Status::InvalidArgument, format!("{what}: the extent overflows usize")))?,
    };
    if need > len {
        return Err(Error::new(Status::InvalidArgument, format!("{what}: the copy reaches element {need}, the buffer holds {len}")));
    }
    bytes_of::<T>(pitch)
}

/// The stream's own async calls refuse a capturing stream: what a graph
/// replays is recorded through [`Capture`](crate::Capture), which keeps the
/// buffers borrowed for the graph's life.
fn refuse_capture(what: &str, stream: &Stream) -> Result<()> {
    if stream.is_capturing() {
        return Err(Error::new(
            Status::Capture,
            format!("{what}: the stream is capturing; record it through the Capture (it keeps the buffers for the graph)"),
        ));
    }
    Ok(())
}

impl<T: Pod> DeviceBuffer<T> {
    fn same_stream(&self, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)
    }

    pub(crate) fn h2d_async(&self, src: &[T], stream: &Stream) -> Result<()> {
        self.same_stream(stream)?;
        if src.len() > self.len() {
            return Err(size_mismatch("copy_from_host_async", src.len(), self.len()));
        }
        let bytes = std::mem::size_of_val(src);
        self.call(|c| unsafe { sys::metrale_copy_h2d_async(c, src.as_ptr().cast(), bytes, self.ptr, stream.raw) })
    }

    pub(crate) fn d2d_async(&self, src: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &src.shared)?;
        self.same_stream(stream)?;
        if src.len() > self.len() {
            return Err(size_mismatch("copy_from_async", src.len(), self.len()));
        }
        self.call(|c| unsafe { sys::metrale_copy_d2d_async(c, src.ptr, self.ptr, src.bytes(), stream.raw) })
    }

    pub(crate) fn d2d_2d_async(&self, src: &DeviceBuffer<T>, shape: Copy2d, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &src.shared)?;
        self.same_stream(stream)?;
        let src_pitch = extent_2d::<T>("copy_2d (source)", &shape, shape.src_pitch, src.len())?;
        let dst_pitch = extent_2d::<T>("copy_2d (destination)", &shape, shape.dst_pitch, self.len())?;
        let width = bytes_of::<T>(shape.width)?;
        self.call(|c| unsafe {
            sys::metrale_copy_d2d_2d_async(c, src.ptr, src_pitch, self.ptr, dst_pitch, width, shape.height, stream.raw)
        })
    }

    pub(crate) fn memset_on(&self, value: u8, stream: &Stream) -> Result<()> {
        self.same_stream(stream)?;
        self.call(|c| unsafe { sys::metrale_memset_async(c, self.ptr, value, self.bytes(), stream.raw) })
    }

    /// Records the copy into `dst` and hands `dst` back boxed for the graph.
    pub(crate) fn d2h_into_graph<H: GraphHostMemory<T>>(&self, mut dst: H, stream: &Stream) -> Result<Kept> {
        self.same_stream(stream)?;
        let (target, len) = dst.target()?;
        if len > self.len() {
            return Err(size_mismatch("copy_to_host (capture)", len, self.len()));
        }
        let bytes = bytes_of::<T>(len)?;
        self.call(|c| unsafe { sys::metrale_copy_d2h_async(c, self.ptr, target.cast(), bytes, stream.raw) })?;
        Ok(Box::new(dst))
    }

    /// Host to device on `stream`. `src` may be reused on return: the
    /// library waits when the source is pinned (whoever pinned it). Refused
    /// (Capture) while `stream` captures: use [`Capture::copy_from_host`](crate::Capture::copy_from_host).
    pub fn copy_from_host_async(&mut self, src: &[T], stream: &Stream) -> Result<()> {
        refuse_capture("copy_from_host_async", stream)?;
        self.h2d_async(src, stream)
    }

    /// Device to host on `stream`, waiting for the stream before returning
    /// (Capture while it captures: nothing is recorded).
    pub fn copy_to_host_on_stream(&self, dst: &mut [T], stream: &Stream) -> Result<()> {
        self.same_stream(stream)?;
        if dst.len() > self.len() {
            return Err(size_mismatch("copy_to_host_on_stream", dst.len(), self.len()));
        }
        let bytes = std::mem::size_of_val(dst);
        self.call(|c| unsafe { sys::metrale_copy_d2h_on_stream(c, self.ptr, dst.as_mut_ptr().cast(), bytes, stream.raw) })
    }

    /// Device to host on `stream` without waiting (`metrale_copy_d2h_async`):
    /// the first `dst.len()` elements land in `dst` when the stream gets
    /// there. `dst` remembers the copy, and its slices, `free` and Drop wait
    /// for it. Refused (Capture) while `stream` captures: a replay would
    /// write `dst` later; use [`Capture::copy_to_host`](crate::Capture::copy_to_host),
    /// which moves the memory into the graph.
    pub fn copy_to_pinned_async(&self, dst: &mut PinnedHostBuffer<T>, stream: &Stream) -> Result<()> {
        self.same_stream(stream)?;
        if dst.len() > self.len() {
            return Err(size_mismatch("copy_to_pinned_async", dst.len(), self.len()));
        }
        refuse_capture("copy_to_pinned_async", stream)?;
        let bytes = bytes_of::<T>(dst.len())?;
        let target = dst.dma_target()?;
        self.call(|c| unsafe { sys::metrale_copy_d2h_async(c, self.ptr, target.cast(), bytes, stream.raw) })?;
        // The copy is enqueued: dst is the device's until an event after it
        // completes, or, failing an event, until the stream is drained.
        let pending = match Event::create_in(&self.shared, false).and_then(|e| e.record(stream).map(|()| e)) {
            Ok(event) => Pending::Copy(event),
            Err(e) => match stream.synchronize() {
                Ok(()) => Pending::Idle,
                Err(wait) => Pending::Lost(Error::new(
                    wait.status,
                    format!("the copy's end could not be recorded ({e}) nor waited for ({wait})"),
                )),
            },
        };
        dst.set_pending(pending);
        Ok(())
    }

    /// Device-to-device copy of all of `src` to the start of this buffer on
    /// `stream`. Refused (Capture) while `stream` captures: use
    /// [`Capture::copy`](crate::Capture::copy).
    pub fn copy_from_async(&mut self, src: &DeviceBuffer<T>, stream: &Stream) -> Result<()> {
        refuse_capture("copy_from_async", stream)?;
        self.d2d_async(src, stream)
    }

    /// Pitched 2D copy from `src` into this buffer on `stream`
    /// (`metrale_copy_d2d_2d_async`); both extents are checked against the
    /// buffers' lengths first. Refused (Capture) while `stream` captures:
    /// use [`Capture::copy_2d`](crate::Capture::copy_2d).
    pub fn copy_2d_from_async(&mut self, src: &DeviceBuffer<T>, shape: Copy2d, stream: &Stream) -> Result<()> {
        refuse_capture("copy_2d_from_async", stream)?;
        self.d2d_2d_async(src, shape, stream)
    }

    /// Sets every byte of the buffer to `value` on `stream`. Refused
    /// (Capture) while `stream` captures: use [`Capture::memset`](crate::Capture::memset).
    pub fn memset_async(&mut self, value: u8, stream: &Stream) -> Result<()> {
        refuse_capture("memset_async", stream)?;
        self.memset_on(value, stream)
    }
}
