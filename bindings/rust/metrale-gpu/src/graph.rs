//! Captured graphs, replayed with one call.

use crate::error::{check, Result};
use crate::shared::Shared;
use crate::stream::Stream;
use metrale_gpu_sys as sys;
use std::sync::Arc;

/// Work captured from a stream ([`Stream::end_capture`]); destroyed on Drop.
pub struct Graph {
    shared: Arc<Shared>,
    raw: *mut sys::metrale_graph_t,
}

unsafe impl Send for Graph {}
unsafe impl Sync for Graph {}

impl Graph {
    pub(crate) fn new(shared: Arc<Shared>, raw: *mut sys::metrale_graph_t) -> Graph {
        Graph { shared, raw }
    }

    /// Replays the graph on `stream`.
    pub fn launch(&self, stream: &Stream) -> Result<()> {
        Shared::same(&self.shared, &stream.shared)?;
        self.shared.with(|c| check(unsafe { sys::metrale_graph_launch(c, self.raw, stream.raw) }))
    }

    /// Destroys now and reports the status (Drop ignores it).
    pub fn destroy(mut self) -> Result<()> {
        let raw = std::mem::replace(&mut self.raw, std::ptr::null_mut());
        self.shared.with(|c| check(unsafe { sys::metrale_graph_destroy(c, raw) }))
    }
}

impl Drop for Graph {
    fn drop(&mut self) {
        if !self.raw.is_null() {
            let raw = self.raw;
            let _ = self.shared.with(|c| check(unsafe { sys::metrale_graph_destroy(c, raw) }));
        }
    }
}

impl std::fmt::Debug for Graph {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Graph({:p})", self.raw)
    }
}
