"""The process-wide contexts behind libmetrale_gpu_pluggable (one per
device), which the PyTorch and CuPy allocators use."""
import ctypes

from . import _lib, sites
from .context import Context, options
from .errors import check_pluggable


def configure(**opts):
    """Options for the per-device contexts (context option names, e.g.
    redzone_bytes=64, pool=1, backend="cuda"). Call before the first
    allocation; MetraleError (INVALID_ARGUMENT) afterwards."""
    o = options(**opts)
    check_pluggable(_lib.pluggable().metrale_pluggable_configure(ctypes.byref(o)),
                    "metrale_pluggable_configure")


def device_context(device=0):
    """The context behind `device` (created if needed), as a borrowed
    Context: its report, scan, counters and pool figures."""
    h = ctypes.c_void_p()
    check_pluggable(_lib.pluggable().metrale_pluggable_context(device, ctypes.byref(h)),
                    "metrale_pluggable_context")
    return Context.borrow(h.value)


def alloc(size, device=0, stream=0):
    """metrale_pluggable_alloc: the pointer (int), or 0 when it failed
    (last_error() says why) or size is 0."""
    return _lib.pluggable().metrale_pluggable_alloc(size, device, stream or None) or 0


def free(ptr, size=0, device=0, stream=0):
    _lib.pluggable().metrale_pluggable_free(ptr or None, size, device, stream or None)


def last_error():
    """libmetrale_gpu_pluggable's message for this thread's last failure."""
    return _lib.pluggable().metrale_pluggable_last_error_message().decode("utf-8", "replace")


def prepare(python_sites, **opts):
    """configure(**opts) and the Python-site setting, for the installers."""
    configure(**opts)
    if python_sites:
        sites.capture_python_sites(True)
    else:
        sites.install_pluggable_site_fn(_lib.pluggable())
