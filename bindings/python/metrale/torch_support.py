"""PyTorch on libmetrale_gpu: install_torch_allocator() hands every CUDA
allocation of the process to libmetrale_gpu_pluggable (through
torch.cuda.memory.CUDAPluggableAllocator), and tag_modules() tags each
tensor with the name of the module that allocated it."""
import threading

from . import _lib, pluggable, tags
from .errors import MetraleError

_installed = None
_hook_state = threading.local()


class TorchAllocator:
    """What install_torch_allocator returns: the path it loaded and the
    per-device contexts' views."""

    def __init__(self, path, torch_allocator):
        self.path = path
        self.torch_allocator = torch_allocator

    def context(self, device=0):
        return pluggable.device_context(device)

    def report(self, device=0, top_n=0):
        return self.context(device).report(top_n)

    def report_by_tag(self, device=0, top_n=0):
        return self.context(device).report_by_tag(top_n)

    def scan(self, device=0):
        """torch.cuda.synchronize(), then the red-zone scan of that device."""
        import torch

        torch.cuda.synchronize(device)
        return self.context(device).scan()

    def pool_stats(self, device=0):
        return self.context(device).pool_stats()


def install_torch_allocator(redzone_bytes=0, pool=1, python_sites=False, backend="cuda",
                            **opts):
    """Makes libmetrale_gpu PyTorch's CUDA allocator. Call before any CUDA
    tensor exists (PyTorch refuses to swap an allocator in use). Options are
    context options (redzone_bytes, pool, quarantine_bytes, ...); the
    environment overrides them as for any context. python_sites=True records
    the allocating Python line of each tensor (a Python call per
    allocation). Returns a TorchAllocator. Raises RuntimeError when called
    twice or when PyTorch already allocated."""
    global _installed
    import torch

    if _installed is not None:
        raise RuntimeError("install_torch_allocator was called already in this process")
    path = _lib.pluggable_path()
    pluggable.prepare(python_sites, redzone_bytes=redzone_bytes, pool=pool, backend=backend,
                      **opts)
    alloc = torch.cuda.memory.CUDAPluggableAllocator(path, "metrale_pluggable_alloc",
                                                     "metrale_pluggable_free")
    try:
        torch.cuda.memory.change_current_allocator(alloc)
    except RuntimeError as e:
        raise RuntimeError(
            "PyTorch's CUDA allocator is in use already: install_torch_allocator() must run "
            f"before the first CUDA tensor ({e})") from e
    _installed = TorchAllocator(path, alloc)
    return _installed


def installed():
    """The TorchAllocator installed in this process, or None."""
    return _installed


def _pushed():
    s = getattr(_hook_state, "names", None)
    if s is None:
        s = _hook_state.names = []
    return s


def _push(name):
    # A hook must never break the model: a refused push (a full tag table,
    # say) leaves the allocation untagged, and its pop pops nothing.
    try:
        tags.push(name)
        _pushed().append(True)
    except MetraleError:
        _pushed().append(False)


def _pop():
    s = _pushed()
    if s and s.pop():
        tags.pop()


def reset_hook_tags():
    """Pops what module hooks pushed on this thread and did not pop (a
    forward that raised skips its post-hook)."""
    while _pushed():
        _pop()


def tag_modules(model, prefix=None, backward=False):
    """Tags what each submodule of `model` allocates with its qualified name
    (prefix.name; the root is prefix or its class name): a forward
    pre-hook pushes the tag and a forward hook pops it. backward=True also
    tags the backward pass of each leaf module (one without children:
    Linear, LayerNorm, ...) as "<name>.backward" with full backward hooks,
    which run on the autograd thread where backward allocates (they refuse
    in-place ops on those modules' outputs). Returns the hook handles (call
    .remove() on each to undo)."""
    root = prefix or type(model).__name__
    handles = []
    for name, module in model.named_modules():
        tag = f"{root}.{name}" if name else root

        def pre(mod, args, tag=tag):
            _push(tag)

        def post(mod, args, out):
            _pop()

        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
        if backward and next(module.children(), None) is None:
            if not hasattr(module, "register_full_backward_pre_hook"):
                raise RuntimeError("tag_modules(backward=True) needs torch >= 2.0 "
                                   "(register_full_backward_pre_hook)")
            btag = tag + ".backward"

            def bpre(mod, grad_out, tag=btag):
                # Leaf modules never nest, so a tag still pushed here is one
                # whose post-hook did not run (the hook may be skipped when
                # no input needs a gradient): drop it before pushing.
                reset_hook_tags()
                _push(tag)

            def bpost(mod, grad_in, grad_out):
                _pop()

            handles.append(module.register_full_backward_pre_hook(bpre))
            handles.append(module.register_full_backward_hook(bpost))
    return handles
