//! Raw bindings to `include/metrale_gpu.h`, written by hand.
//!
//! Everything here mirrors the C header one to one; read the header for what
//! each function does. The `header_drift` test fails when this file and the
//! header disagree (a function, a constant, a struct's size or a field's
//! offset). The safe API lives in the `metrale-gpu` crate.
//!
//! C enums are plain integer type aliases with constants, because a Rust
//! enum receiving a value outside its variants would be undefined behaviour.

#![allow(non_camel_case_types)]
#![no_std]

use core::ffi::{c_char, c_int, c_uint, c_void};
use core::marker::{PhantomData, PhantomPinned};

pub const METRALE_VERSION_MAJOR: c_int = 0;
pub const METRALE_VERSION_MINOR: c_int = 2;
pub const METRALE_VERSION_PATCH: c_int = 0;

macro_rules! opaque {
    ($($name:ident),* $(,)?) => {$(
        /// An opaque handle type; only ever used through a pointer.
        #[repr(C)]
        pub struct $name {
            _data: [u8; 0],
            _marker: PhantomData<(*mut u8, PhantomPinned)>,
        }
    )*};
}
opaque!(metrale_context_t, metrale_stream_t, metrale_event_t, metrale_graph_t, metrale_kernel_t);

/// A device address. On the host backend it is a host address.
pub type metrale_devptr_t = u64;

#[repr(C)]
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct metrale_dim3_t {
    pub x: u32,
    pub y: u32,
    pub z: u32,
}

pub type metrale_status_t = c_uint;
pub const METRALE_OK: metrale_status_t = 0;
pub const METRALE_ERROR_INVALID_ARGUMENT: metrale_status_t = 1;
pub const METRALE_ERROR_OUT_OF_MEMORY: metrale_status_t = 2;
pub const METRALE_ERROR_NOT_FOUND: metrale_status_t = 3;
pub const METRALE_ERROR_NO_DRIVER: metrale_status_t = 4;
pub const METRALE_ERROR_NO_DEVICE: metrale_status_t = 5;
pub const METRALE_ERROR_UNSUPPORTED: metrale_status_t = 6;
pub const METRALE_ERROR_CONTEXT_LOST: metrale_status_t = 7;
pub const METRALE_ERROR_REDZONE_CORRUPTED: metrale_status_t = 8;
pub const METRALE_ERROR_OUT_OF_BOUNDS: metrale_status_t = 9;
pub const METRALE_ERROR_CAPTURE: metrale_status_t = 10;
pub const METRALE_ERROR_BUFFER_TOO_SMALL: metrale_status_t = 11;
pub const METRALE_ERROR_DRIVER: metrale_status_t = 12;
pub const METRALE_ERROR_INTERNAL: metrale_status_t = 13;

pub type metrale_backend_t = c_uint;
pub const METRALE_BACKEND_AUTO: metrale_backend_t = 0;
pub const METRALE_BACKEND_CUDA: metrale_backend_t = 1;
pub const METRALE_BACKEND_HOST: metrale_backend_t = 2;

pub type metrale_alloc_kind_t = c_uint;
pub const METRALE_ALLOC_DEVICE: metrale_alloc_kind_t = 0;
pub const METRALE_ALLOC_MANAGED: metrale_alloc_kind_t = 1;

pub type metrale_log_level_t = c_uint;
pub const METRALE_LOG_TRACE: metrale_log_level_t = 0;
pub const METRALE_LOG_DEBUG: metrale_log_level_t = 1;
pub const METRALE_LOG_INFO: metrale_log_level_t = 2;
pub const METRALE_LOG_WARN: metrale_log_level_t = 3;
pub const METRALE_LOG_ERROR: metrale_log_level_t = 4;
pub const METRALE_LOG_CRITICAL: metrale_log_level_t = 5;
pub const METRALE_LOG_OFF: metrale_log_level_t = 6;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_allocation_t {
    pub ptr: metrale_devptr_t,
    pub bytes: usize,
    pub seq: u64,
    pub file: *const c_char,
    pub line: c_int,
    pub kind: metrale_alloc_kind_t,
    pub redzone_bytes: usize,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_redzone_violation_t {
    pub ptr: metrale_devptr_t,
    pub bytes: usize,
    pub seq: u64,
    pub file: *const c_char,
    pub line: c_int,
    pub first_bad_offset: usize,
    pub bad_bytes: usize,
    pub expected: u8,
    pub found: u8,
}

pub const METRALE_REDZONE_PATTERN: u8 = 0xA5;
/// first_bad_offset when the bad bytes a check counted were rewritten before
/// they could be read back (found is 0 then).
pub const METRALE_REDZONE_OFFSET_UNKNOWN: usize = usize::MAX;
/// Freed-pad findings kept between two scans (the rest: `pads_unlisted`).
pub const METRALE_REDZONE_FREED_REPORTS_MAX: usize = 4096;

/// Bounds on allocation tags (metrale_tag_push).
pub const METRALE_TAG_MAX_BYTES: usize = 256;
pub const METRALE_TAG_MAX_DEPTH: usize = 256;
pub const METRALE_TAG_MAX_TAGS: usize = 65536;

/// The largest module file metrale_module_load_file reads (1 GiB).
pub const METRALE_MODULE_FILE_MAX_BYTES: usize = 1073741824;
/// The largest packed argument buffer for a kernel of unknown parameter layout.
pub const METRALE_PACKED_ARGS_MAX_BYTES: usize = 4096;
pub const METRALE_QUARANTINE_PATTERN: u8 = 0xD7;
pub const METRALE_STAGING_DEFAULT_THRESHOLD: u32 = 1 << 20;
pub const METRALE_STAGING_DEFAULT_BUFFER_BYTES: u32 = 4 << 20;
pub const METRALE_STAGING_DEFAULT_BUFFERS: u32 = 8;
pub const METRALE_STAGING_DEFAULT_THREADS: u32 = 12;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_use_after_free_t {
    pub ptr: metrale_devptr_t,
    pub bytes: usize,
    pub seq: u64,
    pub alloc_file: *const c_char,
    pub alloc_line: c_int,
    pub free_file: *const c_char,
    pub free_line: c_int,
    pub first_bad_offset: usize,
    pub bad_bytes: usize,
    pub found: u8,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct metrale_pool_stats_t {
    pub struct_size: usize,
    pub enabled: c_int,
    pub reserved_bytes: u64,
    pub in_use_bytes: u64,
    pub requested_bytes: u64,
    pub cached_bytes: u64,
    pub peak_in_use_bytes: u64,
    pub chunk_allocs: u64,
    pub chunk_frees: u64,
    pub largest_free_block: u64,
    pub blocks_in_use: u64,
    pub quarantined_bytes: u64,
    pub pad_fills: u64,
    pub pad_fills_skipped: u64,
    pub pad_checks: u64,
    pub pads_checked: u64,
    pub pads_overwritten: u64,
    pub pads_pending: u64,
    pub pads_pending_bytes: u64,
    pub pads_unlisted: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct metrale_counters_t {
    pub struct_size: usize,
    pub launches: u64,
    pub graph_launches: u64,
    pub stream_syncs: u64,
    pub h2d_copies: u64,
    pub h2d_bytes: u64,
    pub d2h_copies: u64,
    pub d2h_bytes: u64,
    pub d2d_copies: u64,
    pub d2d_bytes: u64,
    pub memsets: u64,
    pub memset_bytes: u64,
    pub allocs: u64,
    pub alloc_bytes: u64,
    pub frees: u64,
    pub free_bytes: u64,
    pub kernel_lookups: u64,
    pub kernel_lookup_misses: u64,
    pub pinned_source_waits: u64,
    pub timings_dropped: u64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_device_info_t {
    pub name: [c_char; 256],
    pub compute_major: c_int,
    pub compute_minor: c_int,
    pub sm_count: c_int,
    pub total_memory: usize,
    pub backend: metrale_backend_t,
    pub ordinal: c_int,
}

pub type metrale_trace_kind_t = c_uint;
pub const METRALE_TRACE_LAUNCH: metrale_trace_kind_t = 0;
pub const METRALE_TRACE_D2D: metrale_trace_kind_t = 1;
pub const METRALE_TRACE_MEMSET: metrale_trace_kind_t = 2;

pub const METRALE_TRACE_MAX_ARGS: usize = 8;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_trace_entry_t {
    pub kind: metrale_trace_kind_t,
    pub kernel: *const c_char,
    pub grid: metrale_dim3_t,
    pub block: metrale_dim3_t,
    pub shared_bytes: u32,
    pub nargs: u32,
    pub args: [u64; METRALE_TRACE_MAX_ARGS],
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_kernel_audit_entry_t {
    pub module: *const c_char,
    pub function: *const c_char,
    pub found: c_int,
    pub file: *const c_char,
    pub line: c_int,
}

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_kernel_timing_t {
    pub kernel: *const c_char,
    pub launches: u64,
    pub total_ms: f64,
}

#[repr(C)]
#[derive(Clone, Copy, Debug, Default)]
pub struct metrale_context_options_t {
    pub struct_size: usize,
    pub backend: metrale_backend_t,
    pub device: c_int,
    pub redzone_bytes: usize,
    pub redzone_min_index: u64,
    pub checked_pointers: c_int,
    pub debug_sync: c_int,
    pub launch_trace: c_int,
    pub kernel_timing: c_int,
    pub trace_capacity: usize,
    // 0.2 fields (metrale_context_options_init_sized writes them).
    pub pool: c_int,
    pub quarantine_bytes: usize,
    pub staging_threshold: usize,
    pub staging_buffer_bytes: usize,
    pub staging_buffers: u32,
    pub staging_threads: u32,
    pub pinned_pool: c_int,
}

pub type metrale_log_fn =
    Option<unsafe extern "C" fn(level: metrale_log_level_t, message: *const c_char, user: *mut c_void)>;

#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct metrale_host_kernel_call_t {
    pub grid: metrale_dim3_t,
    pub block: metrale_dim3_t,
    pub shared_bytes: u32,
    pub params: *mut *mut c_void,
    pub args: *const c_void,
    pub args_bytes: usize,
}

pub type metrale_host_kernel_fn = Option<
    unsafe extern "C" fn(call: *const metrale_host_kernel_call_t, user: *mut c_void) -> metrale_status_t,
>;

pub const METRALE_EVENT_DEFAULT: c_uint = 0;
pub const METRALE_EVENT_DISABLE_TIMING: c_uint = 1;

extern "C" {
    // Errors, version, logging
    pub fn metrale_status_name(status: metrale_status_t) -> *const c_char;
    pub fn metrale_last_error_message() -> *const c_char;
    pub fn metrale_version(major: *mut c_int, minor: *mut c_int, patch: *mut c_int) -> metrale_status_t;
    pub fn metrale_log_set_level(level: metrale_log_level_t) -> metrale_status_t;
    pub fn metrale_log_set_callback(fn_: metrale_log_fn, user: *mut c_void) -> metrale_status_t;

    // Context
    pub fn metrale_context_options_init(opts: *mut metrale_context_options_t) -> metrale_status_t;
    pub fn metrale_context_options_init_sized(
        opts: *mut metrale_context_options_t,
        struct_size: usize,
    ) -> metrale_status_t;
    pub fn metrale_context_create(
        opts: *const metrale_context_options_t,
        out: *mut *mut metrale_context_t,
    ) -> metrale_status_t;
    pub fn metrale_context_destroy(ctx: *mut metrale_context_t) -> metrale_status_t;
    pub fn metrale_context_backend(ctx: *const metrale_context_t) -> metrale_backend_t;
    pub fn metrale_context_bind_thread(ctx: *mut metrale_context_t) -> metrale_status_t;
    pub fn metrale_context_fault(ctx: *mut metrale_context_t) -> metrale_status_t;

    // Memory and the ledger
    pub fn metrale_alloc_at(
        ctx: *mut metrale_context_t,
        bytes: usize,
        file: *const c_char,
        line: c_int,
        out: *mut metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_alloc_managed_at(
        ctx: *mut metrale_context_t,
        bytes: usize,
        file: *const c_char,
        line: c_int,
        out: *mut metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_free(ctx: *mut metrale_context_t, dptr: metrale_devptr_t) -> metrale_status_t;
    pub fn metrale_free_at(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        file: *const c_char,
        line: c_int,
    ) -> metrale_status_t;
    pub fn metrale_quarantine_scan(
        ctx: *mut metrale_context_t,
        out: *mut metrale_use_after_free_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;

    // The caching pool
    pub fn metrale_alloc_async_at(
        ctx: *mut metrale_context_t,
        bytes: usize,
        s: *mut metrale_stream_t,
        file: *const c_char,
        line: c_int,
        out: *mut metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_free_async(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        s: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_free_async_at(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        s: *mut metrale_stream_t,
        file: *const c_char,
        line: c_int,
    ) -> metrale_status_t;
    pub fn metrale_record_stream(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        s: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_pool_stats(ctx: *mut metrale_context_t, out: *mut metrale_pool_stats_t) -> metrale_status_t;
    pub fn metrale_pool_trim(
        ctx: *mut metrale_context_t,
        keep_bytes: usize,
        released: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_alloc_arena(
        ctx: *mut metrale_context_t,
        bytes: usize,
        out: *mut metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_free_arena(ctx: *mut metrale_context_t, dptr: metrale_devptr_t) -> metrale_status_t;
    pub fn metrale_host_alloc_pinned(
        ctx: *mut metrale_context_t,
        bytes: usize,
        out: *mut *mut c_void,
    ) -> metrale_status_t;
    pub fn metrale_host_free_pinned(ctx: *mut metrale_context_t, hptr: *mut c_void) -> metrale_status_t;
    pub fn metrale_host_register(
        ctx: *mut metrale_context_t,
        hptr: *mut c_void,
        bytes: usize,
    ) -> metrale_status_t;
    pub fn metrale_host_unregister(ctx: *mut metrale_context_t, hptr: *mut c_void) -> metrale_status_t;
    pub fn metrale_host_is_pinned(
        ctx: *mut metrale_context_t,
        hptr: *const c_void,
        bytes: usize,
        yes: *mut c_int,
    ) -> metrale_status_t;
    pub fn metrale_host_device_pointer(
        ctx: *mut metrale_context_t,
        hptr: *mut c_void,
        out: *mut metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_live_bytes(ctx: *mut metrale_context_t, out: *mut usize) -> metrale_status_t;
    pub fn metrale_live_count(ctx: *mut metrale_context_t, out: *mut usize) -> metrale_status_t;
    pub fn metrale_chunk_slack_bytes(ctx: *mut metrale_context_t, out: *mut usize) -> metrale_status_t;
    pub fn metrale_live_allocations(
        ctx: *mut metrale_context_t,
        out: *mut metrale_allocation_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_alloc_report(
        ctx: *mut metrale_context_t,
        top_n: usize,
        min_mib: usize,
        buf: *mut c_char,
        buflen: usize,
        needed: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_sweep_unreleased(ctx: *mut metrale_context_t, count: *mut usize) -> metrale_status_t;

    // Red zones
    pub fn metrale_redzone_scan(
        ctx: *mut metrale_context_t,
        out: *mut metrale_redzone_violation_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_redzone_poison(ctx: *mut metrale_context_t, lo: u64, hi: u64) -> metrale_status_t;

    // Copies and memsets
    pub fn metrale_copy_h2d(
        ctx: *mut metrale_context_t,
        src: *const c_void,
        bytes: usize,
        dst: metrale_devptr_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2h(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst: *mut c_void,
        bytes: usize,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2h_on_stream(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst: *mut c_void,
        bytes: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2h_async(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst: *mut c_void,
        bytes: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2d(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst: metrale_devptr_t,
        bytes: usize,
    ) -> metrale_status_t;
    pub fn metrale_copy_h2d_async(
        ctx: *mut metrale_context_t,
        src: *const c_void,
        bytes: usize,
        dst: metrale_devptr_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_h2d_async_retained(
        ctx: *mut metrale_context_t,
        src: *const c_void,
        bytes: usize,
        dst: metrale_devptr_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2d_async(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst: metrale_devptr_t,
        bytes: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_d2d_2d_async(
        ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        src_pitch: usize,
        dst: metrale_devptr_t,
        dst_pitch: usize,
        width_bytes: usize,
        height: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_memset(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        value: u8,
        bytes: usize,
    ) -> metrale_status_t;
    pub fn metrale_memset_async(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        value: u8,
        bytes: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;

    // Modules and kernels
    pub fn metrale_module_load_data(
        ctx: *mut metrale_context_t,
        name: *const c_char,
        image: *const c_void,
        size: usize,
    ) -> metrale_status_t;
    pub fn metrale_module_load_file(
        ctx: *mut metrale_context_t,
        name: *const c_char,
        path: *const c_char,
    ) -> metrale_status_t;
    pub fn metrale_module_unload(ctx: *mut metrale_context_t, name: *const c_char) -> metrale_status_t;
    pub fn metrale_has_module(ctx: *mut metrale_context_t, name: *const c_char) -> c_int;
    pub fn metrale_kernel_get_at(
        ctx: *mut metrale_context_t,
        module: *const c_char,
        func: *const c_char,
        file: *const c_char,
        line: c_int,
        kernel: *mut *mut metrale_kernel_t,
    ) -> metrale_status_t;
    pub fn metrale_module_register_host(
        ctx: *mut metrale_context_t,
        module: *const c_char,
        func: *const c_char,
        fn_: metrale_host_kernel_fn,
        user: *mut c_void,
    ) -> metrale_status_t;
    pub fn metrale_module_register_host_params(
        ctx: *mut metrale_context_t,
        module: *const c_char,
        func: *const c_char,
        fn_: metrale_host_kernel_fn,
        user: *mut c_void,
        param_sizes: *const usize,
        nparams: usize,
    ) -> metrale_status_t;
    pub fn metrale_launch(
        ctx: *mut metrale_context_t,
        kernel: *mut metrale_kernel_t,
        grid: metrale_dim3_t,
        block: metrale_dim3_t,
        shared_bytes: u32,
        stream: *mut metrale_stream_t,
        params: *mut *mut c_void,
    ) -> metrale_status_t;
    pub fn metrale_launch_packed(
        ctx: *mut metrale_context_t,
        kernel: *mut metrale_kernel_t,
        grid: metrale_dim3_t,
        block: metrale_dim3_t,
        shared_bytes: u32,
        stream: *mut metrale_stream_t,
        args: *const c_void,
        args_bytes: usize,
    ) -> metrale_status_t;

    // Streams and events
    pub fn metrale_stream_create(
        ctx: *mut metrale_context_t,
        out: *mut *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_stream_destroy(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_stream_synchronize(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_default_stream(ctx: *mut metrale_context_t) -> *mut metrale_stream_t;
    pub fn metrale_stream_is_capturing(ctx: *mut metrale_context_t, stream: *mut metrale_stream_t) -> c_int;
    pub fn metrale_stream_wrap(
        ctx: *mut metrale_context_t,
        native: *mut c_void,
        out: *mut *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_tag_push(tag: *const c_char) -> metrale_status_t;
    pub fn metrale_tag_pop() -> metrale_status_t;
    pub fn metrale_tag_current() -> *const c_char;
    pub fn metrale_alloc_report_by_tag(
        ctx: *mut metrale_context_t,
        top_n: usize,
        min_mib: usize,
        buf: *mut c_char,
        buflen: usize,
        needed: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_allocation_tag(
        ctx: *mut metrale_context_t,
        dptr: metrale_devptr_t,
        tag: *mut *const c_char,
    ) -> metrale_status_t;
    pub fn metrale_event_create(
        ctx: *mut metrale_context_t,
        flags: c_uint,
        out: *mut *mut metrale_event_t,
    ) -> metrale_status_t;
    pub fn metrale_event_record(
        ctx: *mut metrale_context_t,
        event: *mut metrale_event_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_event_synchronize(
        ctx: *mut metrale_context_t,
        event: *mut metrale_event_t,
    ) -> metrale_status_t;
    pub fn metrale_event_query(
        ctx: *mut metrale_context_t,
        event: *mut metrale_event_t,
        done: *mut c_int,
    ) -> metrale_status_t;
    pub fn metrale_event_destroy(ctx: *mut metrale_context_t, event: *mut metrale_event_t) -> metrale_status_t;
    pub fn metrale_stream_wait_event(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
        event: *mut metrale_event_t,
    ) -> metrale_status_t;
    pub fn metrale_event_elapsed_ms(
        ctx: *mut metrale_context_t,
        start: *mut metrale_event_t,
        end: *mut metrale_event_t,
        ms: *mut f32,
    ) -> metrale_status_t;

    // Graphs
    pub fn metrale_graph_begin_capture(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_graph_end_capture(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
        graph: *mut *mut metrale_graph_t,
    ) -> metrale_status_t;
    pub fn metrale_graph_abort_capture(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_graph_launch(
        ctx: *mut metrale_context_t,
        graph: *mut metrale_graph_t,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_graph_destroy(ctx: *mut metrale_context_t, graph: *mut metrale_graph_t) -> metrale_status_t;

    // Device
    pub fn metrale_device_info(
        ctx: *mut metrale_context_t,
        info: *mut metrale_device_info_t,
    ) -> metrale_status_t;
    pub fn metrale_total_memory(ctx: *mut metrale_context_t, bytes: *mut usize) -> metrale_status_t;
    pub fn metrale_free_memory(ctx: *mut metrale_context_t, bytes: *mut usize) -> metrale_status_t;
    pub fn metrale_device_free_memory(ctx: *mut metrale_context_t, bytes: *mut usize) -> metrale_status_t;

    // Telemetry
    pub fn metrale_counters(ctx: *mut metrale_context_t, c: *mut metrale_counters_t) -> metrale_status_t;
    pub fn metrale_counters_reset(ctx: *mut metrale_context_t) -> metrale_status_t;
    pub fn metrale_launch_trace_enable(ctx: *mut metrale_context_t, on: c_int) -> metrale_status_t;
    pub fn metrale_launch_trace_read(
        ctx: *mut metrale_context_t,
        out: *mut metrale_trace_entry_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_kernel_audit_read(
        ctx: *mut metrale_context_t,
        out: *mut metrale_kernel_audit_entry_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_kernel_timing_enable(ctx: *mut metrale_context_t, on: c_int) -> metrale_status_t;
    pub fn metrale_kernel_timings_read(
        ctx: *mut metrale_context_t,
        out: *mut metrale_kernel_timing_t,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;

    // Several devices
    pub fn metrale_device_count(backend: metrale_backend_t, count: *mut c_int) -> metrale_status_t;
    pub fn metrale_peer_access_query(
        ctx: *mut metrale_context_t,
        peer: *mut metrale_context_t,
        can: *mut c_int,
    ) -> metrale_status_t;
    pub fn metrale_peer_access_enable(
        ctx: *mut metrale_context_t,
        peer: *mut metrale_context_t,
    ) -> metrale_status_t;
    pub fn metrale_copy_peer(
        src_ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst_ctx: *mut metrale_context_t,
        dst: metrale_devptr_t,
        bytes: usize,
    ) -> metrale_status_t;
    pub fn metrale_copy_peer_async(
        src_ctx: *mut metrale_context_t,
        src: metrale_devptr_t,
        dst_ctx: *mut metrale_context_t,
        dst: metrale_devptr_t,
        bytes: usize,
        stream: *mut metrale_stream_t,
    ) -> metrale_status_t;
    pub fn metrale_stream_native(
        ctx: *mut metrale_context_t,
        stream: *mut metrale_stream_t,
        native: *mut *mut c_void,
    ) -> metrale_status_t;
    pub fn metrale_kernel_native(
        ctx: *mut metrale_context_t,
        kernel: *mut metrale_kernel_t,
        native: *mut *mut c_void,
    ) -> metrale_status_t;
    pub fn metrale_alloc_report_all(
        top_n: usize,
        min_mib: usize,
        buf: *mut c_char,
        buflen: usize,
        needed: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_device_live(
        backend: metrale_backend_t,
        device: c_int,
        bytes: *mut usize,
        count: *mut usize,
    ) -> metrale_status_t;
}

// The kernel-parameter packing rule and metrale_backend_name (issue 12).
extern "C" {
    pub fn metrale_backend_name(backend: metrale_backend_t) -> *const c_char;
    pub fn metrale_param_layout(
        sizes: *const usize,
        aligns: *const usize,
        nparams: usize,
        offsets: *mut usize,
        args_bytes: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_module_register_host_layout(
        ctx: *mut metrale_context_t,
        module: *const c_char,
        func: *const c_char,
        fn_: metrale_host_kernel_fn,
        user: *mut c_void,
        param_sizes: *const usize,
        param_aligns: *const usize,
        nparams: usize,
    ) -> metrale_status_t;
    pub fn metrale_kernel_param_layout(
        ctx: *mut metrale_context_t,
        kernel: *mut metrale_kernel_t,
        offsets: *mut usize,
        sizes: *mut usize,
        cap: usize,
        count: *mut usize,
    ) -> metrale_status_t;
    pub fn metrale_launch_packed_layout(
        ctx: *mut metrale_context_t,
        kernel: *mut metrale_kernel_t,
        grid: metrale_dim3_t,
        block: metrale_dim3_t,
        shared_bytes: u32,
        stream: *mut metrale_stream_t,
        args: *const c_void,
        args_bytes: usize,
        offsets: *const usize,
        sizes: *const usize,
        nparams: usize,
    ) -> metrale_status_t;
    // The event log (docs/event-log.md).
    pub fn metrale_event_log_open(ctx: *mut metrale_context_t, path: *const c_char) -> metrale_status_t;
    pub fn metrale_event_log_close(ctx: *mut metrale_context_t) -> metrale_status_t;
    pub fn metrale_event_log_flush(ctx: *mut metrale_context_t) -> metrale_status_t;
}
