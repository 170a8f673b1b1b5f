//! Streams and events.
//!
//! A capture holds `&mut Stream` for as long as it is open, so a call
//! holding `&Stream` knows for its whole duration whether the stream
//! records into a graph (see [`Capture`]).

use crate::context::Context;
use crate::error::{check, Error, Result, Status};
use crate::capture::Capture;
use crate::shared::Shared;
use metrale_gpu_sys as sys;
use std::sync::Arc;

/// A stream: work on it runs in order. Made by [`Context::create_stream`]
/// (destroyed on Drop) or [`Context::default_stream`] (owned by the context;
/// it cannot capture from Rust, since several `Stream` values may name it).
pub struct Stream {
    pub(crate) shared: Arc<Shared>,
    pub(crate) raw: *mut sys::metrale_stream_t,
    owned: bool,
    /// True while a Capture (which holds &mut self) is open.
    capturing: bool,
}

// SAFETY: the library allows stream functions from any thread.
unsafe impl Send for Stream {}
unsafe impl Sync for Stream {}

impl Stream {
    pub(crate) fn create(ctx: &Context) -> Result<Stream> {
        let mut raw = std::ptr::null_mut();
        ctx.call(|c| unsafe { sys::metrale_stream_create(c, &mut raw) })?;
        Ok(Stream { shared: ctx.shared.clone(), raw, owned: true, capturing: false })
    }

    pub(crate) fn default_of(ctx: &Context) -> Result<Stream> {
        let raw = ctx.shared.with(|c| Ok(unsafe { sys::metrale_default_stream(c) }))?;
        if raw.is_null() {
            return Err(Error::new(Status::Internal, "the context has no default stream"));
        }
        Ok(Stream { shared: ctx.shared.clone(), raw, owned: false, capturing: false })
    }

    fn call(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> sys::metrale_status_t) -> Result<()> {
        self.shared.with(|c| check(f(c)))
    }

    /// Waits for all work on the stream; `Capture` while it captures.
    pub fn synchronize(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_stream_synchronize(c, self.raw) })
    }

    /// True while capturing: begun from Rust, or as the library answers (a
    /// failed query counts as capturing, as in C).
    pub fn is_capturing(&self) -> bool {
        self.capturing || self.library_says_capturing()
    }

    fn library_says_capturing(&self) -> bool {
        // SAFETY: a live context; a bad stream answers nonzero.
        unsafe { sys::metrale_stream_is_capturing(self.shared.raw(), self.raw) != 0 }
    }

    pub(crate) fn set_captured_from_rust(&mut self, on: bool) {
        self.capturing = on;
    }

    /// Starts recording the work put on this stream into a graph, and
    /// returns the [`Capture`] through which buffers are recorded (its
    /// `end` makes the graph; dropping it aborts). Only a stream from
    /// [`Context::create_stream`] captures (InvalidArgument for the default
    /// stream, which other `Stream` values may name).
    pub fn begin_capture<'g>(&mut self) -> Result<Capture<'_, 'g>> {
        if !self.owned {
            return Err(Error::new(
                Status::InvalidArgument,
                "begin_capture: capture a stream made with create_stream; other Stream values may name the \
                 default stream and would not know it captures",
            ));
        }
        self.call(|c| unsafe { sys::metrale_graph_begin_capture(c, self.raw) })?;
        Ok(Capture::new(self))
    }

    /// Makes this stream wait for the work recorded in `event`.
    pub fn wait_event(&self, event: &Event) -> Result<()> {
        Shared::same(&self.shared, &event.shared)?;
        self.call(|c| unsafe { sys::metrale_stream_wait_event(c, self.raw, event.raw) })
    }

    /// Destroys the stream now and reports the status (Drop ignores it).
    /// The default stream is not destroyed: that is an error.
    pub fn destroy(mut self) -> Result<()> {
        if !self.owned {
            return Err(Error::new(Status::InvalidArgument, "the default stream belongs to the context"));
        }
        self.owned = false;
        self.call(|c| unsafe { sys::metrale_stream_destroy(c, self.raw) })
    }

    /// The raw handle, for calls through `metrale_gpu_sys`.
    pub fn as_raw(&self) -> *mut sys::metrale_stream_t {
        self.raw
    }
}

impl Drop for Stream {
    fn drop(&mut self) {
        if self.owned {
            let _ = self.call(|c| unsafe { sys::metrale_stream_destroy(c, self.raw) });
        }
    }
}

/// An event: a point in a stream to wait for or time.
pub struct Event {
    pub(crate) shared: Arc<Shared>,
    raw: *mut sys::metrale_event_t,
}

// SAFETY: the library allows event functions from any thread.
unsafe impl Send for Event {}
unsafe impl Sync for Event {}

impl Event {
    pub(crate) fn create(ctx: &Context, timing: bool) -> Result<Event> {
        Event::create_in(&ctx.shared, timing)
    }

    pub(crate) fn create_in(shared: &Arc<Shared>, timing: bool) -> Result<Event> {
        let flags = if timing { sys::METRALE_EVENT_DEFAULT } else { sys::METRALE_EVENT_DISABLE_TIMING };
        let mut raw = std::ptr::null_mut();
        check(unsafe { sys::metrale_event_create(shared.raw(), flags, &mut raw) })?;
        Ok(Event { shared: shared.clone(), raw })
    }

    fn call(&self, f: impl FnOnce(*mut sys::metrale_context_t) -> sys::metrale_status_t) -> Result<()> {
        self.shared.with(|c| check(f(c)))
    }

    /// Records the event at the current end of `stream`. Refused (Capture)
    /// while `stream` captures: an event recorded into a capture would let
    /// other streams join it and record into its graph unawares.
    pub fn record(&self, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        if stream.is_capturing() {
            return Err(Error::new(Status::Capture, "Event::record: the stream is capturing"));
        }
        self.call(|c| unsafe { sys::metrale_event_record(c, self.raw, stream.raw) })
    }

    /// Waits until the work before the record has completed.
    pub fn synchronize(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_event_synchronize(c, self.raw) })
    }

    /// True when all work before the record has completed.
    pub fn query(&self) -> Result<bool> {
        let mut done = 0;
        self.call(|c| unsafe { sys::metrale_event_query(c, self.raw, &mut done) })?;
        Ok(done != 0)
    }

    /// Milliseconds from `self` to `end` (both recorded, both timing).
    pub fn elapsed_ms(&self, end: &Event) -> Result<f32> {
        Shared::same(&self.shared, &end.shared)?;
        let mut ms = 0f32;
        self.call(|c| unsafe { sys::metrale_event_elapsed_ms(c, self.raw, end.raw, &mut ms) })?;
        Ok(ms)
    }

    /// Destroys now and reports the status (Drop ignores it).
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        self.call(|c| unsafe { sys::metrale_event_destroy(c, raw) })
    }
}

impl Drop for Event {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let raw = self.raw;
            let _ = self.call(|c| unsafe { sys::metrale_event_destroy(c, raw) });
        }
    }
}

impl std::fmt::Debug for Stream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Stream({:p}{})", self.raw, if self.owned { "" } else { ", default" })
    }
}

impl std::fmt::Debug for Event {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Event({:p})", self.raw)
    }
}
