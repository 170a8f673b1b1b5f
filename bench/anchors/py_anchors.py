#!/usr/bin/env python3
"""Anchors from Python: torch.empty(..., device='cuda') / del and CuPy's
memory pool (cupy.cuda.alloc, cupy.empty), at the sizes bench_alloc
measures; and CuPy's pool at bench_pool's sizes with 1k and 1M other 256 B
blocks live (alloc_free/<size>/cupy_pool/live1k, .../live1M). Writes a fragment in the bench's JSON format; a missing package or
device is a skipped entry saying why, never a crash.

Usage: py_anchors.py OUT.json
"""
import json
import statistics
import sys
import time

SIZES = [256, 64 << 10, 1 << 20, 64 << 20]
POOL_SIZES = [256, 4 << 10, 64 << 10, 1 << 20, 16 << 20, 64 << 20]  # bench_pool's
POOL_BATCH = 1000
REPEATS = 15
WARMUP = 2


def label(n):
    if n >= 1 << 20:
        return f"{n >> 20}MiB"
    if n >= 1024:
        return f"{n >> 10}KiB"
    return f"{n}B"


def batch_for(n):
    return 20 if n >= 64 << 20 else 200 if n >= 1 << 20 else 500


def quantile(sorted_xs, p):
    rank = p * (len(sorted_xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(sorted_xs) - 1)
    return sorted_xs[lo] * (1 - (rank - lo)) + sorted_xs[hi] * (rank - lo)


def measure(fn, batch, after=None):
    samples = []
    for r in range(WARMUP + REPEATS):
        t0 = time.perf_counter_ns()
        fn(batch)
        t1 = time.perf_counter_ns()
        if after:
            after()
        if r >= WARMUP:
            samples.append((t1 - t0) / batch)
    s = sorted(samples)
    return {"median": statistics.median(s), "p10": quantile(s, 0.1), "p90": quantile(s, 0.9),
            "min": s[0], "max": s[-1], "repeats": len(s)}


def entry(variant, n, stats, batch, timing, raw_ref=None):
    e = {"id": f"alloc_free/{label(n)}/{variant}", "group": "alloc_free", "variant": variant,
         "side": "anchor", "size_bytes": n, "unit": "ns/op", "batch": batch, "timing": timing,
         "raw_ref": raw_ref or f"alloc_free/{label(n)}/raw_cuMemAlloc"}
    e.update(stats)
    return e


def torch_anchors(results, skipped, meta):
    try:
        import torch
    except Exception as ex:  # noqa: BLE001 - any import failure is a skip
        skipped.append({"what": "alloc_free/*/torch_py_*", "why": f"import torch failed: {ex}"})
        return
    if not torch.cuda.is_available():
        skipped.append({"what": "alloc_free/*/torch_py_*", "why": "torch.cuda.is_available() is False"})
        return
    meta["torch_version"] = torch.__version__
    meta["torch_cuda"] = str(torch.version.cuda)
    for n in SIZES:
        b = batch_for(n)

        def alloc_free(k, n=n):
            for _ in range(k):
                t = torch.empty(n, dtype=torch.uint8, device="cuda")
                del t
            torch.cuda.synchronize()

        results.append(entry("torch_py_empty_del", n, measure(alloc_free, b), b,
                             "torch.empty(n, uint8, device='cuda') then del, per op; one "
                             "torch.cuda.synchronize per batch inside the timed region"))


def cupy_anchors(results, skipped, meta):
    try:
        import cupy
    except Exception as ex:  # noqa: BLE001
        skipped.append({"what": "alloc_free/*/cupy_*", "why": f"import cupy failed: {ex}"})
        return
    try:
        cupy.cuda.runtime.getDeviceCount()
    except Exception as ex:  # noqa: BLE001
        skipped.append({"what": "alloc_free/*/cupy_*", "why": f"cupy sees no device: {ex}"})
        return
    meta["cupy_version"] = cupy.__version__
    sync = cupy.cuda.Device().synchronize
    for n in SIZES:
        b = batch_for(n)

        def pool_alloc(k, n=n):
            for _ in range(k):
                p = cupy.cuda.alloc(n)
                del p

        def array(k, n=n):
            for _ in range(k):
                a = cupy.empty(n, dtype=cupy.uint8)
                del a

        results.append(entry("cupy_pool_alloc", n, measure(pool_alloc, b, sync), b,
                             "cupy.cuda.alloc(n) then del (memory pool), per op; device synced "
                             "after each batch outside the timed region"))
        results.append(entry("cupy_empty_del", n, measure(array, b, sync), b,
                             "cupy.empty(n, uint8) then del, per op; device synced after each "
                             "batch outside the timed region"))
    cupy_live(results, sync)


def cupy_live(results, sync):
    """bench_pool's rows for CuPy's pool: live + live/8 blocks of 256 B held,
    every 9th freed first, then alloc+free pairs of each size."""
    import cupy
    for live in (1000, 1000000):
        lv = "live1M" if live >= 1000000 else "live1k"
        held = [cupy.cuda.alloc(256) for _ in range(live + live // 8)]
        for i in range(0, len(held), 9):
            held[i] = None
        for n in POOL_SIZES:
            def pool_alloc(k, n=n):
                for _ in range(k):
                    p = cupy.cuda.alloc(n)
                    del p
            e = entry(f"cupy_pool/{lv}", n, measure(pool_alloc, POOL_BATCH, sync), POOL_BATCH,
                      "cupy.cuda.alloc(n) then del (memory pool), per pair, from Python; device "
                      "synced after each batch outside the timed region",
                      raw_ref=f"alloc_free/{label(n)}/raw_cuMemAlloc/{lv}")
            e["note"] = f"{live} other 256 B blocks live, as bench_pool's rows; includes Python's call cost"
            results.append(e)
        del held
        cupy.get_default_memory_pool().free_all_blocks()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "-"
    results, skipped, meta = [], [], {"anchor": "Python: torch.empty/del, CuPy memory pool"}
    for part in (torch_anchors, cupy_anchors):
        try:
            part(results, skipped, meta)
        except Exception as ex:  # noqa: BLE001 - one failing anchor must not lose the others
            skipped.append({"what": part.__name__, "why": f"{type(ex).__name__}: {ex}"})
    doc = {"program": "py_anchors", "meta": meta, "results": results, "skipped": skipped}
    text = json.dumps(doc, indent=1)
    if out == "-":
        print(text)
    else:
        with open(out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
