#!/usr/bin/env python3
"""A planted out-of-bounds write in a PyTorch model, caught by
libmetrale_gpu's red zones and named by tag and site (issue 11).

The model has a module `overflow` whose custom CUDA kernel (built with
torch.utils.cpp_extension.load_inline) is off by one: it writes out[n] of
an n-element output. PyTorch allocates through libmetrale_gpu
(install_torch_allocator, 256-byte red zones, Python frames as sites), the
modules are tagged with their names (tag_modules), and after the forward
pass the red-zone scan reports the overwritten pad: the tensor's tag
(model.overflow) and the line of this file that allocated it.

First the correct kernel runs and the scan must find nothing (no false
positive); then the buggy one, and the scan must name the tag and site.
Exit status: 0 when both hold, 1 when the write was not caught or not
named, 2 when torch or a GPU is missing.

--via-api writes past the tensor with libmetrale_gpu's own memset on its
data_ptr instead (no compiler needed); --via-api is also the fallback when
load_inline cannot build the kernel (no nvcc or ninja), and says so.

Usage: python3 examples/python/planted_bug.py [--via-api]
"""
import argparse
import os
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))
os.environ.setdefault("METRALE_BUILD_DIR", os.path.join(ROOT, "build"))

CUDA_SRC = r"""
#include <torch/extension.h>
#include <ATen/cuda/CUDAContext.h>

__global__ void add_one(const float* in, float* out, int64_t n, int64_t last) {
  int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
  if (i <= last) out[i] = in[i < n ? i : n - 1] + 1.0f;  // last = n: one past the end
}

void launch(torch::Tensor in, torch::Tensor out, bool off_by_one) {
  const int64_t n = out.numel();
  const int64_t last = off_by_one ? n : n - 1;
  const int threads = 256;
  const int blocks = (int)((last + threads) / threads);
  add_one<<<blocks, threads, 0, at::cuda::getCurrentCUDAStream()>>>(
      in.data_ptr<float>(), out.data_ptr<float>(), n, last);
}
"""
CPP_SRC = "void launch(torch::Tensor in, torch::Tensor out, bool off_by_one);"


def build_kernel():
    from torch.utils.cpp_extension import load_inline

    return load_inline(name="metrale_planted_bug", cpp_sources=CPP_SRC, cuda_sources=CUDA_SRC,
                       functions=["launch"], verbose=False).launch


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--via-api", action="store_true",
                    help="write past the tensor with metrale's memset instead of a kernel")
    args = ap.parse_args()
    try:
        import torch
    except ImportError as e:
        print(f"planted_bug: needs torch ({e})", file=sys.stderr)
        return 2
    if not torch.cuda.is_available():
        print("planted_bug: torch sees no CUDA device", file=sys.stderr)
        return 2
    import metrale

    alloc = metrale.install_torch_allocator(redzone_bytes=256, python_sites=True)
    ctx = alloc.context(0)
    launch = None
    if not args.via_api:
        try:
            launch = build_kernel()
            how = "a load_inline CUDA kernel writing out[n]"
        except Exception as e:  # no nvcc, no ninja, ...
            print(f"planted_bug: load_inline failed ({str(e).splitlines()[0]}); "
                  "falling back to --via-api", file=sys.stderr)
    if launch is None:
        how = "metrale_memset 4 bytes past the tensor's data_ptr"

        def launch(inp, out, off_by_one):
            torch.cuda.current_stream().synchronize()
            extra = 4 if off_by_one else 0
            ctx.memset(out.data_ptr(), 0x3F, out.nbytes + extra)

    class Overflow(torch.nn.Module):
        def __init__(self, off_by_one):
            super().__init__()
            self.off_by_one = off_by_one

        def forward(self, x):
            out = torch.empty(x.numel(), device=x.device)  # the site the scan must name
            launch(x.reshape(-1).contiguous(), out, self.off_by_one)
            return out.reshape(x.shape)

    class Model(torch.nn.Module):
        def __init__(self, off_by_one):
            super().__init__()
            self.linear = torch.nn.Linear(1000, 1000)
            self.overflow = Overflow(off_by_one)

        def forward(self, x):
            return self.overflow(self.linear(x))

    site_line = Overflow.forward.__code__.co_firstlineno + 1
    ok = True
    for off_by_one in (False, True):
        model = Model(off_by_one).cuda()
        metrale.tag_modules(model, prefix="model")
        with torch.no_grad():
            y = model(torch.randn(4, 1000, device="cuda"))
        torch.cuda.synchronize()
        found = alloc.scan()
        if not off_by_one:
            if found:
                print(f"planted_bug: FALSE POSITIVE: the correct kernel was reported: {found}")
                ok = False
            else:
                print("planted_bug: correct kernel: the scan finds nothing (as it must)")
            del y, model
            continue
        if not found:
            print(f"planted_bug: NOT CAUGHT: {how} left every red zone intact")
            return 1
        v = found[0]
        print(f"planted_bug: caught {len(found)} overwritten red zone(s) after {how}:")
        for w in found:
            print(f"  {w['bad_bytes']} bad bytes at offset {w['first_bad_offset']} past "
                  f"{w['bytes']}-byte allocation 0x{w['ptr']:x}, tag {w['tag']!r}, allocated "
                  f"at {w['file']}:{w['line']} (found 0x{w['found']:02x}, expected "
                  f"0x{w['expected']:02x})")
        print(f"  library message: {v['message']}")
        named = (v["ptr"] == y.data_ptr() and v["tag"] == "model.overflow"
                 and os.path.basename(v["file"]) == "planted_bug.py" and v["line"] == site_line)
        if not named:
            print(f"planted_bug: CAUGHT BUT NOT NAMED: expected tag 'model.overflow' and site "
                  f"planted_bug.py:{site_line} for 0x{y.data_ptr():x}")
            ok = False
        else:
            print(f"planted_bug: named: tag model.overflow, site planted_bug.py:{site_line}")
        ctx.poison()  # repair the pad so the process exits clean
    print("planted_bug: PASS" if ok else "planted_bug: FAIL")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
