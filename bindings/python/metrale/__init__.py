"""metrale: libmetrale_gpu from Python (stdlib ctypes only).

    import metrale
    with metrale.Context(backend="host", redzone_bytes=64) as ctx:
        with metrale.tag("loader"):
            p = ctx.alloc(1024)
        print(ctx.report_by_tag())
        ctx.free(p)

PyTorch and CuPy: metrale.install_torch_allocator() and
metrale.install_cupy_allocator() (before the first GPU allocation).
The library is found through $METRALE_GPU_LIB, $METRALE_BUILD_DIR, this
checkout's build/ directory, or the system's library path (see _lib.py).
"""
import ctypes as _ctypes

from . import pluggable
from ._lib import LibraryNotFound, lib_path, pluggable_path
from .context import Context, options
from .cupy_support import install_cupy_allocator
from .errors import MetraleError
from .sites import capture_python_sites
from .tags import current as current_tag
from .tags import pop as pop_tag
from .tags import push as push_tag
from .tags import tag
from .torch_support import install_torch_allocator, reset_hook_tags, tag_modules

__all__ = [
    "Context", "MetraleError", "LibraryNotFound", "options", "tag", "push_tag", "pop_tag",
    "current_tag", "capture_python_sites", "install_torch_allocator", "install_cupy_allocator",
    "tag_modules", "reset_hook_tags", "pluggable", "lib_path", "pluggable_path", "version",
]


def version():
    """(major, minor, patch) of the loaded library."""
    from . import _lib

    v = [_ctypes.c_int() for _ in range(3)]
    _lib.lib().metrale_version(*[_ctypes.byref(x) for x in v])
    return tuple(x.value for x in v)
