//! The context's telemetry counters as a typed Rust struct.

use crate::context::Context;
use crate::error::Result;
use metrale_gpu_sys as sys;

/// Telemetry counters of one context (`metrale_counters_t`), read with
/// [`Context::counters`]. Every count starts at 0 at creation and at
/// [`Context::counters_reset`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub struct Counters {
    /// Kernel launches, graph replays not included.
    pub launches: u64,
    /// Graph launches.
    pub graph_launches: u64,
    /// Stream synchronizations, the library's own waits included.
    pub stream_syncs: u64,
    /// Host-to-device copies.
    pub h2d_copies: u64,
    /// Bytes copied host to device.
    pub h2d_bytes: u64,
    /// Device-to-host copies.
    pub d2h_copies: u64,
    /// Bytes copied device to host.
    pub d2h_bytes: u64,
    /// Device-to-device copies (2D copies included).
    pub d2d_copies: u64,
    /// Bytes copied device to device (2D: width times height).
    pub d2d_bytes: u64,
    /// Memsets.
    pub memsets: u64,
    /// Bytes set by memsets.
    pub memset_bytes: u64,
    /// Ledger allocations (device and managed).
    pub allocs: u64,
    /// Bytes of ledger allocations.
    pub alloc_bytes: u64,
    /// Ledger frees (sweeps included).
    pub frees: u64,
    /// Bytes of ledger frees.
    pub free_bytes: u64,
    /// Kernel lookups.
    pub kernel_lookups: u64,
    /// Kernel lookups that found nothing.
    pub kernel_lookup_misses: u64,
    /// Async host-to-device copies that waited because the source was pinned.
    pub pinned_source_waits: u64,
    /// Launches left untimed by the kernel-timing caps.
    pub timings_dropped: u64,
}

impl From<&sys::metrale_counters_t> for Counters {
    fn from(c: &sys::metrale_counters_t) -> Counters {
        Counters {
            launches: c.launches,
            graph_launches: c.graph_launches,
            stream_syncs: c.stream_syncs,
            h2d_copies: c.h2d_copies,
            h2d_bytes: c.h2d_bytes,
            d2h_copies: c.d2h_copies,
            d2h_bytes: c.d2h_bytes,
            d2d_copies: c.d2d_copies,
            d2d_bytes: c.d2d_bytes,
            memsets: c.memsets,
            memset_bytes: c.memset_bytes,
            allocs: c.allocs,
            alloc_bytes: c.alloc_bytes,
            frees: c.frees,
            free_bytes: c.free_bytes,
            kernel_lookups: c.kernel_lookups,
            kernel_lookup_misses: c.kernel_lookup_misses,
            pinned_source_waits: c.pinned_source_waits,
            timings_dropped: c.timings_dropped,
        }
    }
}

impl Context {
    /// The counters now.
    pub fn counters(&self) -> Result<Counters> {
        let mut raw = sys::metrale_counters_t {
            struct_size: std::mem::size_of::<sys::metrale_counters_t>(),
            ..Default::default()
        };
        self.call(|c| unsafe { sys::metrale_counters(c, &mut raw) })?;
        Ok(Counters::from(&raw))
    }

    /// Sets every counter back to 0.
    pub fn counters_reset(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_counters_reset(c) })
    }
}
