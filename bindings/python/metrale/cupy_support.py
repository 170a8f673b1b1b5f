"""CuPy on libmetrale_gpu: install_cupy_allocator() makes every CuPy
allocation a metrale_pluggable_alloc on CuPy's current device and stream."""
from . import _lib, pluggable

_installed = False


class _Block:
    """Owner of one allocation: frees it (on the stream it was made on) when
    CuPy drops its last MemoryPointer."""

    __slots__ = ("ptr", "size", "device", "stream", "_free")

    def __init__(self, ptr, size, device, stream, free):
        self.ptr, self.size, self.device, self.stream, self._free = ptr, size, device, stream, free

    def __del__(self):
        self._free(self.ptr, self.size, self.device, self.stream or None)


def install_cupy_allocator(redzone_bytes=0, pool=1, python_sites=False, backend="cuda", **opts):
    """cupy.cuda.set_allocator with a function returning a MemoryPointer over
    cupy.cuda.UnownedMemory whose owner frees through libmetrale_gpu. Options
    as install_torch_allocator. Returns the allocator function."""
    global _installed
    import cupy

    if _installed:
        raise RuntimeError("install_cupy_allocator was called already in this process")
    p = _lib.pluggable()
    pluggable.prepare(python_sites, redzone_bytes=redzone_bytes, pool=pool, backend=backend,
                      **opts)
    alloc_fn, free_fn = p.metrale_pluggable_alloc, p.metrale_pluggable_free

    def metrale_malloc(size):
        device = cupy.cuda.runtime.getDevice()
        stream = cupy.cuda.get_current_stream().ptr
        if size == 0:
            return cupy.cuda.MemoryPointer(cupy.cuda.UnownedMemory(0, 0, None, device), 0)
        ptr = alloc_fn(size, device, stream or None)
        if not ptr:
            raise cupy.cuda.memory.OutOfMemoryError(size, 0, 0)
        owner = _Block(ptr, size, device, stream, free_fn)
        mem = cupy.cuda.UnownedMemory(ptr, size, owner, device)
        return cupy.cuda.MemoryPointer(mem, 0)

    cupy.cuda.set_allocator(metrale_malloc)
    _installed = True
    return metrale_malloc
