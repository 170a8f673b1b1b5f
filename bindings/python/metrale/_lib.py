"""Finding and loading libmetrale_gpu (and libmetrale_gpu_pluggable).

Where the library is looked for, first hit wins:
  1. $METRALE_GPU_LIB, a path to libmetrale_gpu.so;
  2. $METRALE_BUILD_DIR, a Meson build directory of this project;
  3. the build directory of the checkout this package sits in (build/ at the
     repository root), for running from a source tree;
  4. ctypes.util.find_library("metrale_gpu"): an installed library.
The pluggable library is $METRALE_GPU_PLUGGABLE_LIB, else src/pluggable/ of
the same build directory, else beside the main library, else
find_library("metrale_gpu_pluggable").
"""
import ctypes
import ctypes.util
import os
import threading

from . import _types as T

_REPO_BUILD = os.path.normpath(os.path.join(os.path.dirname(__file__), "..", "..", "..", "build"))

_lock = threading.Lock()
_lib = None
_lib_path = None
_pluggable = None
_pluggable_path = None


class LibraryNotFound(OSError):
    """libmetrale_gpu (or its pluggable companion) could not be found."""


def _build_dirs():
    dirs = []
    if os.environ.get("METRALE_BUILD_DIR"):
        dirs.append(os.environ["METRALE_BUILD_DIR"])
    dirs.append(_REPO_BUILD)
    return dirs


def _find_main():
    env = os.environ.get("METRALE_GPU_LIB")
    if env:
        if not os.path.exists(env):
            raise LibraryNotFound(f"METRALE_GPU_LIB={env} does not exist")
        return env
    for d in _build_dirs():
        p = os.path.join(d, "libmetrale_gpu.so")
        if os.path.exists(p):
            return p
    found = ctypes.util.find_library("metrale_gpu")
    if found:
        return found
    raise LibraryNotFound(
        "libmetrale_gpu.so not found: set METRALE_GPU_LIB to its path or METRALE_BUILD_DIR to a "
        "build directory, or install the library")


def _find_pluggable(main_path):
    env = os.environ.get("METRALE_GPU_PLUGGABLE_LIB")
    if env:
        if not os.path.exists(env):
            raise LibraryNotFound(f"METRALE_GPU_PLUGGABLE_LIB={env} does not exist")
        return env
    here = os.path.dirname(main_path) if os.path.isabs(main_path) else None
    candidates = []
    if here:
        candidates += [os.path.join(here, "src", "pluggable", "libmetrale_gpu_pluggable.so"),
                       os.path.join(here, "libmetrale_gpu_pluggable.so")]
    for c in candidates:
        if os.path.exists(c):
            return c
    found = ctypes.util.find_library("metrale_gpu_pluggable")
    if found:
        return found
    raise LibraryNotFound(
        "libmetrale_gpu_pluggable.so not found: set METRALE_GPU_PLUGGABLE_LIB to its path")


def _declare(lib):
    vp, sz, st, u64 = ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_uint64
    P = ctypes.POINTER
    sigs = {
        "metrale_status_name": (ctypes.c_char_p, [st]),
        "metrale_last_error_message": (ctypes.c_char_p, []),
        "metrale_version": (st, [P(ctypes.c_int)] * 3),
        "metrale_log_set_level": (st, [ctypes.c_int]),
        "metrale_context_options_init_sized": (st, [P(T.ContextOptions), sz]),
        "metrale_context_create": (st, [P(T.ContextOptions), P(vp)]),
        "metrale_context_destroy": (st, [vp]),
        "metrale_context_backend": (ctypes.c_int, [vp]),
        "metrale_alloc_at": (st, [vp, sz, ctypes.c_char_p, ctypes.c_int, P(u64)]),
        "metrale_alloc_async_at": (st, [vp, sz, vp, ctypes.c_char_p, ctypes.c_int, P(u64)]),
        "metrale_free_at": (st, [vp, u64, ctypes.c_char_p, ctypes.c_int]),
        "metrale_free_async": (st, [vp, u64, vp]),
        "metrale_free_async_at": (st, [vp, u64, vp, ctypes.c_char_p, ctypes.c_int]),
        "metrale_memset": (st, [vp, u64, ctypes.c_uint8, sz]),
        "metrale_copy_h2d": (st, [vp, vp, sz, u64]),
        "metrale_copy_d2h": (st, [vp, u64, vp, sz]),
        "metrale_live_bytes": (st, [vp, P(sz)]),
        "metrale_live_count": (st, [vp, P(sz)]),
        "metrale_live_allocations": (st, [vp, P(T.Allocation), sz, P(sz)]),
        "metrale_alloc_report": (st, [vp, sz, sz, ctypes.c_char_p, sz, P(sz)]),
        "metrale_alloc_report_by_tag": (st, [vp, sz, sz, ctypes.c_char_p, sz, P(sz)]),
        "metrale_allocation_tag": (st, [vp, u64, P(ctypes.c_char_p)]),
        "metrale_sweep_unreleased": (st, [vp, P(sz)]),
        "metrale_redzone_scan": (st, [vp, P(T.RedzoneViolation), sz, P(sz)]),
        "metrale_redzone_poison": (st, [vp, u64, u64]),
        "metrale_quarantine_scan": (st, [vp, P(T.UseAfterFree), sz, P(sz)]),
        "metrale_counters": (st, [vp, P(T.Counters)]),
        "metrale_counters_reset": (st, [vp]),
        "metrale_pool_stats": (st, [vp, P(T.PoolStats)]),
        "metrale_pool_trim": (st, [vp, sz, P(sz)]),
        "metrale_stream_create": (st, [vp, P(vp)]),
        "metrale_stream_wrap": (st, [vp, vp, P(vp)]),
        "metrale_stream_destroy": (st, [vp, vp]),
        "metrale_stream_synchronize": (st, [vp, vp]),
        "metrale_tag_push": (st, [ctypes.c_char_p]),
        "metrale_tag_pop": (st, []),
        "metrale_tag_current": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


SITE_FN = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_size_t,
                           ctypes.POINTER(ctypes.c_int), ctypes.c_void_p)


def _declare_pluggable(lib):
    vp = ctypes.c_void_p
    sigs = {
        "metrale_pluggable_alloc": (vp, [ctypes.c_ssize_t, ctypes.c_int, vp]),
        "metrale_pluggable_free": (None, [vp, ctypes.c_ssize_t, ctypes.c_int, vp]),
        "metrale_pluggable_configure": (ctypes.c_int, [ctypes.POINTER(T.ContextOptions)]),
        "metrale_pluggable_context": (ctypes.c_int, [ctypes.c_int, ctypes.POINTER(vp)]),
        "metrale_pluggable_set_site_fn": (ctypes.c_int, [SITE_FN, vp]),
        "metrale_pluggable_last_error_message": (ctypes.c_char_p, []),
    }
    for name, (res, args) in sigs.items():
        f = getattr(lib, name)
        f.restype = res
        f.argtypes = args


def lib():
    """The loaded libmetrale_gpu (loaded on first use)."""
    global _lib, _lib_path
    with _lock:
        if _lib is None:
            path = _find_main()
            loaded = ctypes.CDLL(path)
            _declare(loaded)
            _lib, _lib_path = loaded, path
        return _lib


def lib_path():
    lib()
    return _lib_path


def pluggable():
    """The loaded libmetrale_gpu_pluggable (after the main library, so both
    use one copy of it)."""
    global _pluggable, _pluggable_path
    main = lib()
    with _lock:
        if _pluggable is None:
            path = _find_pluggable(_lib_path)
            loaded = ctypes.CDLL(path)
            _declare_pluggable(loaded)
            _pluggable, _pluggable_path = loaded, path
        del main
        return _pluggable


def pluggable_path():
    """The path of libmetrale_gpu_pluggable: what CUDAPluggableAllocator loads."""
    pluggable()
    return os.path.abspath(_pluggable_path) if os.path.exists(_pluggable_path) else _pluggable_path
