//! The ledger, red zones, telemetry and device info as Rust values.

use crate::context::{Backend, Context};
use crate::error::{check, Result, Status};
use crate::kernel::Dim3;
use crate::util::owned;
use metrale_gpu_sys as sys;

/// What kind of memory an allocation is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AllocKind {
    /// Device memory ([`Context::alloc`]).
    Device,
    /// Managed (unified) memory ([`Context::alloc_managed`]).
    Managed,
}

/// One live ledger entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Allocation {
    /// The device address the caller got.
    pub ptr: u64,
    /// The bytes asked for.
    pub bytes: usize,
    /// The red-zone sequence number (per context, from 0).
    pub seq: u64,
    /// The allocating file, as the caller's `file!()`.
    pub file: String,
    /// The allocating line.
    pub line: i32,
    /// Device or managed.
    pub kind: AllocKind,
    /// Bytes of red-zone pad after the buffer (0 = none).
    pub redzone_bytes: usize,
}

/// One overwritten red-zone pad.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RedzoneViolation {
    /// The allocation's device address.
    pub ptr: u64,
    /// Its size as asked.
    pub bytes: usize,
    /// Its sequence number.
    pub seq: u64,
    /// Its allocating file.
    pub file: String,
    /// Its allocating line.
    pub line: i32,
    /// From the end of the buffer: 0 is the byte at ptr + bytes; usize::MAX
    /// (METRALE_REDZONE_OFFSET_UNKNOWN) when the bad bytes were rewritten
    /// before they could be read back (found is 0 then).
    pub first_bad_offset: usize,
    /// How many pad bytes differ from the pattern.
    pub bad_bytes: usize,
    /// The pattern byte.
    pub expected: u8,
    /// What the first bad byte holds.
    pub found: u8,
}

/// What a launch-trace entry records.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TraceKind {
    /// A kernel launch.
    Launch,
    /// A device-to-device copy (args: src, dst, bytes).
    D2D,
    /// An async memset (args: ptr, value, bytes).
    Memset,
}

/// One launch-trace entry.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceEntry {
    /// What was put on the stream.
    pub kind: TraceKind,
    /// "module::function" for launches.
    pub kernel: Option<String>,
    /// The launch's grid.
    pub grid: Dim3,
    /// The launch's block.
    pub block: Dim3,
    /// Dynamic shared memory bytes.
    pub shared_bytes: u32,
    /// The arguments widened to 64 bits (at most 8).
    pub args: Vec<u64>,
}

/// One kernel lookup, found or not.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelAuditEntry {
    /// The module name looked up.
    pub module: String,
    /// The function name looked up.
    pub function: String,
    /// Whether the lookup found it.
    pub found: bool,
    /// The caller's file.
    pub file: String,
    /// The caller's line.
    pub line: i32,
}

/// Launch count and total time of one kernel (kernel timing on).
#[derive(Clone, Debug, PartialEq)]
pub struct KernelTiming {
    /// "module::function".
    pub kernel: String,
    /// Timed launches.
    pub launches: u64,
    /// Their total time in milliseconds.
    pub total_ms: f64,
}

/// What the device is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DeviceInfo {
    /// The device's name.
    pub name: String,
    /// (major, minor); (0, 0) on the host backend.
    pub compute_capability: (i32, i32),
    /// Multiprocessors (CPUs on the host backend).
    pub sm_count: i32,
    /// Total memory in bytes.
    pub total_memory: usize,
    /// The backend answering.
    pub backend: Backend,
    /// The device ordinal.
    pub ordinal: i32,
}

type ListFn<T> = unsafe extern "C" fn(*mut sys::metrale_context_t, *mut T, usize, *mut usize) -> sys::metrale_status_t;

impl Context {
    /// Size query, then read; retried while the list grows in between.
    /// `also_ok` is a status that still fills the list (the scan's).
    fn read_list<T: Copy, R>(&self, f: ListFn<T>, also_ok: Option<Status>, conv: impl Fn(&T) -> R) -> Result<Vec<R>> {
        let c = self.as_raw();
        loop {
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
            // Strings are copied while self keeps the context alive.
            return Ok(buf.iter().map(&conv).collect());
        }
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
        let c = self.as_raw();
        loop {
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
        }
    }

    /// Frees every live ledger allocation that no [`DeviceBuffer`](crate::DeviceBuffer)
    /// owns (given up with `into_raw`, or made through the sys crate), logs
    /// their sites and returns how many there were. InvalidArgument, with
    /// nothing freed, while any `DeviceBuffer` of this context still owns
    /// ledger memory: the sweep would free memory safe code still uses.
    pub fn sweep_unreleased(&self) -> Result<usize> {
        self.shared.when_nothing_owned(|| {
            let mut n = 0usize;
            self.call(|c| unsafe { sys::metrale_sweep_unreleased(c, &mut n) })?;
            Ok(n)
        })
    }

    /// Turns the launch trace on (clearing it) or off.
    pub fn launch_trace_enable(&self, on: bool) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_launch_trace_enable(c, on.into()) })
    }

    /// The launch trace, oldest first.
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

    /// Turns kernel timing on or off.
    pub fn kernel_timing_enable(&self, on: bool) -> Result<()> {
        self.call(|c| unsafe { sys::metrale_kernel_timing_enable(c, on.into()) })
    }

    /// Per-kernel launch counts and times.
    pub fn kernel_timings(&self) -> Result<Vec<KernelTiming>> {
        self.read_list(sys::metrale_kernel_timings_read, None, |t| KernelTiming {
            kernel: owned(t.kernel),
            launches: t.launches,
            total_ms: t.total_ms,
        })
    }
}
