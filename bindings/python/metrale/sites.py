"""The allocating Python frame as an allocation's site (file:line).

Off by default: then nothing is asked per allocation. When on, an
allocation made through Context.alloc, or through the pluggable allocator
(PyTorch, CuPy), is recorded at the innermost Python frame outside the
frameworks (torch, cupy) and this package: the line of the user's code that
caused it."""
import ctypes
import os
import sys

from . import _lib
from .errors import check_pluggable

# This package's own frames are never the user's line.
_skip_prefixes = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "")]
_callback = None  # kept alive while installed


def _framework_dirs():
    dirs = []
    for name in ("torch", "cupy", "cupyx"):
        mod = sys.modules.get(name)
        f = getattr(mod, "__file__", None) if mod is not None else None
        if f:
            dirs.append(os.path.join(os.path.dirname(os.path.abspath(f)), ""))
    return dirs


def caller_site(depth=1):
    """(file, line) of the innermost frame outside this package and the
    frameworks, or None (no Python frame on this thread, e.g. PyTorch's
    autograd threads)."""
    try:
        frame = sys._getframe(depth + 1)
    except ValueError:
        return None
    skip = tuple(_skip_prefixes) + tuple(_framework_dirs())
    while frame is not None:
        path = frame.f_code.co_filename
        if not os.path.abspath(path).startswith(skip) and not path.startswith("<frozen"):
            return path, frame.f_lineno
        frame = frame.f_back
    return None


def _site_fn(buf, cap, line, user):
    site = caller_site(1)
    if site is None:
        return 0
    data = site[0].encode("utf-8", "replace")[: cap - 1] + b"\0"
    ctypes.memmove(buf, data, len(data))
    line[0] = site[1]
    return 1


_python_sites = False


def enabled():
    """Whether Python frames are recorded as sites."""
    return _python_sites


def capture_python_sites(on=True):
    """Records the allocating Python frame as the site of allocations made
    through Context.alloc (without an explicit site) and, where
    libmetrale_gpu_pluggable is found, through the pluggable allocator
    (PyTorch, CuPy). Off: nothing is asked per allocation."""
    global _python_sites
    _python_sites = bool(on)
    try:
        p = _lib.pluggable()
    except _lib.LibraryNotFound:
        return
    install_pluggable_site_fn(p)


def install_pluggable_site_fn(p):
    """Brings the pluggable library's site function in line with the setting."""
    global _callback
    if _python_sites:
        cb = _lib.SITE_FN(_site_fn)
        check_pluggable(p.metrale_pluggable_set_site_fn(cb, None), "metrale_pluggable_set_site_fn")
        _callback = cb  # after the library stopped using the previous one
    else:
        check_pluggable(p.metrale_pluggable_set_site_fn(_lib.SITE_FN(), None),
                        "metrale_pluggable_set_site_fn")
        _callback = None
