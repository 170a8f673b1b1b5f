"""What the tests share: the backend they run on (METRALE_TEST_BACKEND,
default host, as the C suites) and the reasons GPU-only tests skip."""
import importlib.util
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))  # the package, from the source tree

BACKEND = os.environ.get("METRALE_TEST_BACKEND", "host")


def have(module):
    return importlib.util.find_spec(module) is not None


def torch_gpu_reason():
    """None when torch with a CUDA device is usable, else why not."""
    if not have("torch"):
        return "torch is not installed"
    import torch

    if not torch.cuda.is_available():
        return "torch sees no CUDA device"
    return None


def cupy_gpu_reason():
    if not have("cupy"):
        return "cupy is not installed"
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "cupy sees no CUDA device"
    except Exception as e:  # no driver: CUDARuntimeError
        return f"cupy cannot reach a device ({e})"
    return None
