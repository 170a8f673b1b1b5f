//! The ledger, red zones, telemetry and device info as Rust values.

use crate::context::{Backend, Context};
use crate::error::{check, Result, Status};
use crate::kernel::Dim3;
use crate::util::owned;
use metrale_gpu_sys as sys;

/// What kind of memory an allocation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    Device,
    Managed,
}

/// One live ledger entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    pub ptr: u64,
    pub bytes: usize,
    pub seq: u64,
    pub file: String,
    pub line: i32,
    pub kind: AllocKind,
    pub redzone_bytes: usize,
}

/// One overwritten red-zone pad.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedzoneViolation {
    pub ptr: u64,
    pub bytes: usize,
    pub seq: u64,
    pub file: String,
    pub line: i32,
    /// From the end of the buffer: 0 is the byte at ptr + bytes.
    pub first_bad_offset: usize,
    pub bad_bytes: usize,
    pub expected: u8,
    pub found: u8,
}

/// Telemetry counters (see `metrale_counters_t`).
pub type Counters = sys::metrale_counters_t;

/// What a launch-trace entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    Launch,
    D2D,
    Memset,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    pub kind: TraceKind,
    /// "module::function" for launches.
    pub kernel: Option<String>,
    pub grid: Dim3,
    pub block: Dim3,
    pub shared_bytes: u32,
    pub args: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAuditEntry {
    pub module: String,
    pub function: String,
    pub found: bool,
    pub file: String,
    pub line: i32,
}

#[derive(Clone, Debug, PartialEq)]
pub struct KernelTiming {
    pub kernel: String,
    pub launches: u64,
    pub total_ms: f64,
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    pub name: String,
    pub compute_capability: (i32, i32),
    pub sm_count: i32,
    pub total_memory: usize,
    pub backend: Backend,
    pub ordinal: i32,
}

type ListFn<T> = unsafe extern "C" fn(*mut sys::metrale_context_t, *mut T, usize, *mut usize) -> sys::metrale_status_t;

impl Context {
    /// Size query, then read; retried while the list grows in between.
    /// `also_ok` is a status that still fills the list (the scan's).
    fn read_list<T: Copy, R>(&self, f: ListFn<T>, also_ok: Option<Status>, conv: impl Fn(&T) -> R) -> Result<Vec<R>> {
        self.shared.with(|c| loop {
            let mut count = 0usize;
            let st = unsafe { f(c, std::ptr::null_mut(), 0, &mut count) };
            if st != sys::METRALE_OK && also_ok.map(Status::to_raw) != Some(st) {
                check(st)?;
            }
            let mut buf: Vec<T> = Vec::with_capacity(count);
            let mut got = 0usize;
            let st = unsafe { f(c, buf.as_mut_ptr(), count, &mut got) };
            if st == sys::METRALE_ERROR_BUFFER_TOO_SMALL {
                continue;
            }
            if st != sys::METRALE_OK && also_ok.map(Status::to_raw) != Some(st) {
                check(st)?;
            }
            // SAFETY: the library wrote min(got, count) entries.
            unsafe { buf.set_len(got.min(count)) };
            // Strings are copied while the read lock keeps the context alive.
            return Ok(buf.iter().map(&conv).collect());
        })
    }

    /// Live ledger allocations, oldest first, with their sites.
    pub fn live_allocations(&self) -> Result<Vec<Allocation>> {
        self.read_list(sys::metrale_live_allocations, None, |a| Allocation {
            ptr: a.ptr,
            bytes: a.bytes,
            seq: a.seq,
            file: owned(a.file),
            line: a.line,
            kind: if a.kind == sys::METRALE_ALLOC_MANAGED { AllocKind::Managed } else { AllocKind::Device },
            redzone_bytes: a.redzone_bytes,
        })
    }

    /// Scans every red-zone pad. An empty Vec means none was overwritten;
    /// overwritten pads come back as values, not as an error.
    pub fn redzone_scan(&self) -> Result<Vec<RedzoneViolation>> {
        self.read_list(sys::metrale_redzone_scan, Some(Status::RedzoneCorrupted), |v| RedzoneViolation {
            ptr: v.ptr,
            bytes: v.bytes,
            seq: v.seq,
            file: owned(v.file),
            line: v.line,
            first_bad_offset: v.first_bad_offset,
            bad_bytes: v.bad_bytes,
            expected: v.expected,
            found: v.found,
        })
    }

    /// Refills the pads of live allocations with seq in `lo..hi`.
    pub fn redzone_poison(&self, seqs: std::ops::Range<u64>) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_redzone_poison(c, seqs.start, seqs.end) })
    }

    /// Live bytes by allocation site, largest first (`top_n` 0 = all sites,
    /// `min_mib` 0 = any size), then a total line.
    pub fn alloc_report(&self, top_n: usize, min_mib: usize) -> Result<String> {
        self.shared.with(|c| loop {
            let mut needed = 0usize;
            check(unsafe { sys::metrale_alloc_report(c, top_n, min_mib, std::ptr::null_mut(), 0, &mut needed) })?;
            let mut buf = vec![0u8; needed.max(1)];
            let st = unsafe {
                sys::metrale_alloc_report(c, top_n, min_mib, buf.as_mut_ptr().cast(), buf.len(), &mut needed)
            };
            if st == sys::METRALE_ERROR_BUFFER_TOO_SMALL {
                continue;
            }
            check(st)?;
            let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
            return Ok(String::from_utf8_lossy(&buf[..end]).into_owned());
        })
    }

    /// Frees every live ledger allocation (buffers still held then fail to
    /// free with NotFound) and returns how many there were.
    pub fn sweep_unreleased(&self) -> Result<usize> {
        let mut n = 0usize;
        self.call(|c| unsafe { sys::metrale_sweep_unreleased(c, &mut n) })?;
        Ok(n)
    }

    pub fn counters(&self) -> Result<Counters> {
        let mut cnt = Counters { struct_size: std::mem::size_of::<Counters>(), ..Default::default() };
        self.call(|c| unsafe { sys::metrale_counters(c, &mut cnt) })?;
        Ok(cnt)
    }

    pub fn counters_reset(&self) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_counters_reset(c) })
    }

    /// Turns the launch trace on (clearing it) or off.
    pub fn launch_trace_enable(&self, on: bool) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_launch_trace_enable(c, on.into()) })
    }

    pub fn launch_trace(&self) -> Result<Vec<TraceEntry>> {
        self.read_list(sys::metrale_launch_trace_read, None, |e| TraceEntry {
            kind: match e.kind {
                sys::METRALE_TRACE_D2D => TraceKind::D2D,
                sys::METRALE_TRACE_MEMSET => TraceKind::Memset,
                _ => TraceKind::Launch,
            },
            kernel: (!e.kernel.is_null()).then(|| owned(e.kernel)),
            grid: e.grid.into(),
            block: e.block.into(),
            shared_bytes: e.shared_bytes,
            args: e.args[..(e.nargs as usize).min(sys::METRALE_TRACE_MAX_ARGS)].to_vec(),
        })
    }

    /// Every kernel lookup, found or not, with the caller's site.
    pub fn kernel_audit(&self) -> Result<Vec<KernelAuditEntry>> {
        self.read_list(sys::metrale_kernel_audit_read, None, |e| KernelAuditEntry {
            module: owned(e.module),
            function: owned(e.function),
            found: e.found != 0,
            file: owned(e.file),
            line: e.line,
        })
    }

    pub fn kernel_timing_enable(&self, on: bool) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_kernel_timing_enable(c, on.into()) })
    }

    pub fn kernel_timings(&self) -> Result<Vec<KernelTiming>> {
        self.read_list(sys::metrale_kernel_timings_read, None, |t| KernelTiming {
            kernel: owned(t.kernel),
            launches: t.launches,
            total_ms: t.total_ms,
        })
    }
}
