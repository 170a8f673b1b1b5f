"""Context: one libmetrale_gpu context, with its memory, ledger, red zones,
counters and pool figures. Device pointers are ints (metrale_devptr_t)."""
import ctypes

from . import _lib, sites
from . import _types as T
from .errors import BUFFER_TOO_SMALL, REDZONE_CORRUPTED, MetraleError, check

BACKENDS = {"auto": 0, "cuda": 1, "host": 2}
BACKEND_NAMES = {v: k for k, v in BACKENDS.items()}


def options(**fields):
    """A ContextOptions with the library's defaults, then `fields` set
    (backend may be "auto", "cuda" or "host")."""
    o = T.ContextOptions()
    check(_lib.lib().metrale_context_options_init_sized(ctypes.byref(o), ctypes.sizeof(o)),
          "metrale_context_options_init")
    for name, value in fields.items():
        if name == "backend" and isinstance(value, str):
            value = BACKENDS[value]
        if not hasattr(o, name) or name == "struct_size":
            raise TypeError(f"no context option named {name!r}")
        setattr(o, name, value)
    return o


class Context:
    """A context (metrale_context_create). Use as a context manager or call
    close(); Context.borrow wraps a context owned by someone else (the
    pluggable allocator's), which close() leaves alone."""

    def __init__(self, backend="auto", **opts):
        self._lib = _lib.lib()
        o = options(backend=backend, **opts)
        h = ctypes.c_void_p()
        check(self._lib.metrale_context_create(ctypes.byref(o), ctypes.byref(h)),
              "metrale_context_create")
        self._h = h.value
        self._owned = True

    @classmethod
    def borrow(cls, handle):
        self = cls.__new__(cls)
        self._lib = _lib.lib()
        self._h = handle
        self._owned = False
        return self

    @property
    def handle(self):
        if self._h is None:
            raise MetraleError(1, "the context is closed", "Context")
        return self._h

    def close(self):
        if self._h is not None and self._owned:
            h, self._h = self._h, None
            check(self._lib.metrale_context_destroy(h), "metrale_context_destroy")
        self._h = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    @property
    def backend(self):
        return BACKEND_NAMES.get(self._lib.metrale_context_backend(self.handle), "auto")

    # --- memory ---------------------------------------------------------
    def alloc(self, nbytes, site=None, stream=None):
        """Device memory on the ledger; returns the device pointer (int).
        site: (file, line); default: the calling Python frame when
        metrale.capture_python_sites() is on, else this package's call."""
        if site is None and sites.enabled():
            site = sites.caller_site(1)
        file, line = site if site is not None else ("<python>", 0)
        out = ctypes.c_uint64()
        f = file.encode("utf-8", "replace")
        if stream is None:
            check(self._lib.metrale_alloc_at(self.handle, nbytes, f, line, ctypes.byref(out)),
                  "metrale_alloc")
        else:
            check(self._lib.metrale_alloc_async_at(self.handle, nbytes, stream, f, line,
                                                   ctypes.byref(out)), "metrale_alloc_async")
        return out.value

    def free(self, ptr, stream=None):
        if stream is None:
            check(self._lib.metrale_free_at(self.handle, ptr, None, 0), "metrale_free")
        else:
            check(self._lib.metrale_free_async(self.handle, ptr, stream), "metrale_free_async")

    def copy_from_host(self, data, dst):
        """Copies a bytes-like object to device memory dst (synchronous)."""
        buf = (ctypes.c_char * len(data)).from_buffer_copy(bytes(data))
        check(self._lib.metrale_copy_h2d(self.handle, buf, len(data), dst), "metrale_copy_h2d")

    def copy_to_host(self, src, nbytes):
        buf = ctypes.create_string_buffer(nbytes)
        check(self._lib.metrale_copy_d2h(self.handle, src, buf, nbytes), "metrale_copy_d2h")
        return buf.raw

    def memset(self, ptr, value, nbytes):
        check(self._lib.metrale_memset(self.handle, ptr, value, nbytes), "metrale_memset")

    # --- streams ----------------------------------------------------------
    def wrap_stream(self, native):
        """A stream handle for a native stream (an int: cudaStream_t; 0 is
        the NULL stream). Release it with destroy_stream."""
        h = ctypes.c_void_p()
        check(self._lib.metrale_stream_wrap(self.handle, native or None, ctypes.byref(h)),
              "metrale_stream_wrap")
        return h.value

    def create_stream(self):
        h = ctypes.c_void_p()
        check(self._lib.metrale_stream_create(self.handle, ctypes.byref(h)), "metrale_stream_create")
        return h.value

    def destroy_stream(self, stream):
        check(self._lib.metrale_stream_destroy(self.handle, stream), "metrale_stream_destroy")

    def synchronize(self, stream=None):
        check(self._lib.metrale_stream_synchronize(self.handle, stream),
              "metrale_stream_synchronize")

    # --- the ledger ---------------------------------------------------------
    def live_bytes(self):
        n = ctypes.c_size_t()
        check(self._lib.metrale_live_bytes(self.handle, ctypes.byref(n)), "metrale_live_bytes")
        return n.value

    def live_count(self):
        n = ctypes.c_size_t()
        check(self._lib.metrale_live_count(self.handle, ctypes.byref(n)), "metrale_live_count")
        return n.value

    def live_allocations(self, with_tags=True):
        """Live allocations, oldest first, as dicts (ptr, bytes, seq, file,
        line, kind, redzone_bytes, and tag unless with_tags is False)."""
        while True:
            n = ctypes.c_size_t()
            check(self._lib.metrale_live_allocations(self.handle, None, 0, ctypes.byref(n)),
                  "metrale_live_allocations")
            cap = n.value + 16  # room for allocations made meanwhile
            arr = (T.Allocation * cap)()
            st = self._lib.metrale_live_allocations(self.handle, arr, cap, ctypes.byref(n))
            if st == BUFFER_TOO_SMALL:
                continue
            check(st, "metrale_live_allocations")
            out = [T.as_dict(arr[i]) for i in range(n.value)]
            break
        if with_tags:
            for a in out:
                a["tag"] = self.allocation_tag(a["ptr"], missing=None)
        return out

    def allocation_tag(self, ptr, missing=MetraleError):
        """The tag ptr was allocated under (None: untagged). For a pointer
        that is not live: raises, or returns `missing` when one is given."""
        t = ctypes.c_char_p()
        st = self._lib.metrale_allocation_tag(self.handle, ptr, ctypes.byref(t))
        if st != 0 and missing is not MetraleError:
            return missing
        check(st, "metrale_allocation_tag")
        return t.value.decode("utf-8", "replace") if t.value is not None else None

    def _text(self, fn, name, top_n, min_mib):
        needed = ctypes.c_size_t()
        while True:
            check(fn(self.handle, top_n, min_mib, None, 0, ctypes.byref(needed)), name)
            buf = ctypes.create_string_buffer(needed.value + 256)
            st = fn(self.handle, top_n, min_mib, buf, len(buf), ctypes.byref(needed))
            if st != BUFFER_TOO_SMALL:
                check(st, name)
                return buf.value.decode("utf-8", "replace")

    def report(self, top_n=0, min_mib=0):
        """Live bytes by allocation site, largest first (metrale_alloc_report)."""
        return self._text(self._lib.metrale_alloc_report, "metrale_alloc_report", top_n, min_mib)

    def report_by_tag(self, top_n=0, min_mib=0):
        """Live bytes by tag, largest first (metrale_alloc_report_by_tag)."""
        return self._text(self._lib.metrale_alloc_report_by_tag, "metrale_alloc_report_by_tag",
                          top_n, min_mib)

    def sweep(self):
        n = ctypes.c_size_t()
        check(self._lib.metrale_sweep_unreleased(self.handle, ctypes.byref(n)),
              "metrale_sweep_unreleased")
        return n.value

    # --- red zones ------------------------------------------------------------
    def scan(self, cap=64):
        """Checks every red-zone pad (and the quarantine). Returns the list
        of violations as dicts (each with its allocation's tag where it is
        still live); [] when none. Other failures raise MetraleError."""
        arr = (T.RedzoneViolation * cap)()
        n = ctypes.c_size_t()
        st = self._lib.metrale_redzone_scan(self.handle, arr, cap, ctypes.byref(n))
        if st == 0:
            return []
        if st != REDZONE_CORRUPTED:
            check(st, "metrale_redzone_scan")
        message = self._lib.metrale_last_error_message().decode("utf-8", "replace")
        out = []
        for i in range(min(n.value, cap)):
            v = T.as_dict(arr[i])
            v["tag"] = self.allocation_tag(v["ptr"], missing=None)
            v["message"] = message if i == 0 else None
            out.append(v)
        return out

    def poison(self, lo=0, hi=2**64 - 1):
        """Refills the pads of live allocations with seq in [lo, hi)."""
        check(self._lib.metrale_redzone_poison(self.handle, lo, hi), "metrale_redzone_poison")

    # --- telemetry and the pool ----------------------------------------------
    def counters(self):
        c = T.Counters()
        c.struct_size = ctypes.sizeof(c)
        check(self._lib.metrale_counters(self.handle, ctypes.byref(c)), "metrale_counters")
        return T.as_dict(c)

    def reset_counters(self):
        check(self._lib.metrale_counters_reset(self.handle), "metrale_counters_reset")

    def pool_stats(self):
        s = T.PoolStats()
        s.struct_size = ctypes.sizeof(s)
        check(self._lib.metrale_pool_stats(self.handle, ctypes.byref(s)), "metrale_pool_stats")
        return T.as_dict(s)

    def pool_trim(self, keep_bytes=0):
        n = ctypes.c_size_t()
        check(self._lib.metrale_pool_trim(self.handle, keep_bytes, ctypes.byref(n)),
              "metrale_pool_trim")
        return n.value
