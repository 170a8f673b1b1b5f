"""ctypes mirrors of the structs in include/metrale_gpu.h.

Field names and order follow the header exactly; tests/test_header.py
compares them with the header text, so a field added there and not here
fails the suite instead of corrupting memory.
"""
import ctypes
from ctypes import c_char_p, c_int, c_size_t, c_uint8, c_uint32, c_uint64

devptr = c_uint64


class ContextOptions(ctypes.Structure):
    _fields_ = [
        ("struct_size", c_size_t),
        ("backend", c_int),
        ("device", c_int),
        ("redzone_bytes", c_size_t),
        ("redzone_min_index", c_uint64),
        ("checked_pointers", c_int),
        ("debug_sync", c_int),
        ("launch_trace", c_int),
        ("kernel_timing", c_int),
        ("trace_capacity", c_size_t),
        ("pool", c_int),
        ("quarantine_bytes", c_size_t),
        ("staging_threshold", c_size_t),
        ("staging_buffer_bytes", c_size_t),
        ("staging_buffers", c_uint32),
        ("staging_threads", c_uint32),
        ("pinned_pool", c_int),
    ]


class Allocation(ctypes.Structure):
    _fields_ = [
        ("ptr", devptr),
        ("bytes", c_size_t),
        ("seq", c_uint64),
        ("file", c_char_p),
        ("line", c_int),
        ("kind", c_int),
        ("redzone_bytes", c_size_t),
    ]


class RedzoneViolation(ctypes.Structure):
    _fields_ = [
        ("ptr", devptr),
        ("bytes", c_size_t),
        ("seq", c_uint64),
        ("file", c_char_p),
        ("line", c_int),
        ("first_bad_offset", c_size_t),
        ("bad_bytes", c_size_t),
        ("expected", c_uint8),
        ("found", c_uint8),
    ]


class UseAfterFree(ctypes.Structure):
    _fields_ = [
        ("ptr", devptr),
        ("bytes", c_size_t),
        ("seq", c_uint64),
        ("alloc_file", c_char_p),
        ("alloc_line", c_int),
        ("free_file", c_char_p),
        ("free_line", c_int),
        ("first_bad_offset", c_size_t),
        ("bad_bytes", c_size_t),
        ("found", c_uint8),
    ]


class Counters(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t)] + [
        (name, c_uint64)
        for name in (
            "launches", "graph_launches", "stream_syncs",
            "h2d_copies", "h2d_bytes", "d2h_copies", "d2h_bytes",
            "d2d_copies", "d2d_bytes", "memsets", "memset_bytes",
            "allocs", "alloc_bytes", "frees", "free_bytes",
            "kernel_lookups", "kernel_lookup_misses",
            "pinned_source_waits", "timings_dropped",
        )
    ]


class PoolStats(ctypes.Structure):
    _fields_ = [("struct_size", c_size_t), ("enabled", c_int)] + [
        (name, c_uint64)
        for name in (
            "reserved_bytes", "in_use_bytes", "requested_bytes", "cached_bytes",
            "peak_in_use_bytes", "chunk_allocs", "chunk_frees", "largest_free_block",
            "blocks_in_use", "quarantined_bytes", "pad_fills", "pad_fills_skipped",
            "pad_checks", "pads_checked", "pads_overwritten", "pads_pending",
            "pads_pending_bytes", "pads_unlisted",
        )
    ]


def as_dict(struct):
    """A struct's fields as a dict (bytes fields decoded, struct_size left out)."""
    out = {}
    for name, _ in struct._fields_:
        if name == "struct_size":
            continue
        value = getattr(struct, name)
        out[name] = value.decode("utf-8", "replace") if isinstance(value, bytes) else value
    return out
