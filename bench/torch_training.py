#!/usr/bin/env python3
"""A real PyTorch training loop on libmetrale_gpu's allocator (issue 11).

A small transformer trains STEPS steps on generated data whose batch and
sequence length change every step (so tensor sizes are mixed), under three
allocators, each in its own subprocess (PyTorch's allocator can be changed
only before its first CUDA allocation):
  torch_caching        PyTorch's own caching allocator (the anchor)
  library_pool         libmetrale_gpu_pluggable, caching pool on, red zones off
  library_pool_rz64    the same with 64-byte red zones; the scan after training
                       must find no violation
  pluggable_floor      a reference, not ours: an exact-size cache over
                       cuMemAlloc behind the same CUDAPluggableAllocator
                       interface (bench/torch_alloc_probe.cpp). What torch's
                       pluggable path costs with an allocator that does almost
                       nothing: the library's step time reads against it too
  library_pool_timed   library_pool behind a wrapper that times every alloc
                       and free call: the allocator's own CPU time per step,
                       against the floor's (the wrapper adds two clock reads
                       per call, so its step time is not the figure)
The two probe configs need build/bench/libmetrale_torch_probe.so; without it
they are skipped and the report says so.
Every config runs the same seeded steps, with the same module tagging hooks
(metrale.tag_modules: tags are pushed in all configs, so the step-time ratio
measures the allocator, not the hooks). Rounds alternate the configs
(ABCABC...) and the figure of a config is the median of its rounds' medians.

Reports: step time (median over steps, p10-p90) and its ratio to
torch_caching (goal <= 1.02x for library_pool; red zones reported); peak
reserved bytes (torch.cuda.max_memory_reserved for torch, the pool's
reserved bytes for ours, which it never gives back during the run) against
torch's; the ledger report by tag; the scan result. Writes
<out>/<date>-torch-training-<host>.json and .md (bench/results style).
Exit status: 0 when every config ran, trained (finite, falling loss), the
library configs really allocated through libmetrale_gpu and the red-zone
scan found nothing; 1 otherwise (the markdown says which check failed).
Targets are reported, never asserted.

Usage: python3 bench/torch_training.py [--steps 200] [--rounds 3] [--out bench/results]
Needs: torch with CUDA, and a build of this repository (METRALE_BUILD_DIR,
default ./build) or an installed libmetrale_gpu.
"""
import argparse
import datetime
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, os.path.join(ROOT, "bindings", "python"))

CONFIGS = {
    "torch_caching": {},
    "library_pool": {"redzone_bytes": 0},
    "library_pool_rz64": {"redzone_bytes": 64},
    "pluggable_floor": {},
    "library_pool_timed": {"redzone_bytes": 0},
}
ANCHOR = "torch_caching"
# Configs through libmetrale_torch_probe.so, and which of its pairs they use.
PROBED = {"pluggable_floor": "floor", "library_pool_timed": "timed"}
OURS = ("library_pool", "library_pool_rz64", "library_pool_timed")


def probe_path():
    return os.path.join(os.environ.get("METRALE_BUILD_DIR", os.path.join(ROOT, "build")),
                        "bench", "libmetrale_torch_probe.so")


def install_probe(config):
    """Installs the probe's pair `PROBED[config]` as torch's allocator;
    for the timed pair, in front of the library's, configured as
    install_torch_allocator does. Returns (probe CDLL, TorchAllocator or None)."""
    import ctypes

    import torch
    from metrale import _lib, pluggable
    from metrale.torch_support import TorchAllocator

    probe = ctypes.CDLL(probe_path())
    probe.probe_read.argtypes = [ctypes.POINTER(ctypes.c_uint64)]
    ours = None
    if PROBED[config] == "timed":
        pluggable.prepare(False, pool=1, backend="cuda", **CONFIGS[config])
        lib = _lib.pluggable()
        addr = [ctypes.cast(getattr(lib, n), ctypes.c_void_p)
                for n in ("metrale_pluggable_alloc", "metrale_pluggable_free")]
        probe.probe_set_target.argtypes = [ctypes.c_void_p, ctypes.c_void_p]
        if probe.probe_set_target(addr[0], addr[1]) != 0:
            raise RuntimeError("probe_set_target refused the library's entry points")
    pair = PROBED[config]
    alloc = torch.cuda.memory.CUDAPluggableAllocator(probe_path(), f"probe_{pair}_alloc",
                                                     f"probe_{pair}_free")
    torch.cuda.memory.change_current_allocator(alloc)
    if PROBED[config] == "timed":
        ours = TorchAllocator(_lib.pluggable_path(), alloc)
    return probe, ours


def probe_now(probe):
    """(nanoseconds in alloc and free, alloc calls) so far."""
    import ctypes

    v = (ctypes.c_uint64 * 4)()
    probe.probe_read(v)
    return v[0] + v[2], v[1]


def child(config, steps, warmup, out_path):
    """One config in this process: train, measure, write a JSON result."""
    import metrale
    import torch

    ours = config in OURS
    alloc = probe = None
    if config in PROBED:
        probe, alloc = install_probe(config)
    elif ours:
        alloc = metrale.install_torch_allocator(pool=1, **CONFIGS[config])
    torch.manual_seed(0)
    gen = torch.Generator().manual_seed(1)
    vocab, dim, layers = 4096, 512, 4
    device = "cuda"

    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = torch.nn.Embedding(vocab, dim)
            layer = torch.nn.TransformerEncoderLayer(dim, 8, 4 * dim, dropout=0.1,
                                                     batch_first=True, norm_first=True)
            self.encoder = torch.nn.TransformerEncoder(layer, layers, enable_nested_tensor=False)
            self.head = torch.nn.Linear(dim, vocab)

        def forward(self, tokens):
            return self.head(self.encoder(self.embed(tokens)))

    with metrale.tag("model.init"):
        model = Model().to(device)
    metrale.tag_modules(model, prefix="model", backward=True)
    with metrale.tag("optimizer.init"):
        opt = torch.optim.AdamW(model.parameters(), lr=3e-4)
    loss_fn = torch.nn.CrossEntropyLoss()
    batches, lengths = [8, 16, 24, 32], [64, 96, 128, 192, 256]
    losses, times, alloc_us, calls = [], [], [], []
    import time

    for step in range(warmup + steps):
        b = batches[int(torch.randint(len(batches), (1,), generator=gen))]
        n = lengths[int(torch.randint(len(lengths), (1,), generator=gen))]
        if probe is not None:
            ns0, n0 = probe_now(probe)
        t0 = time.perf_counter()
        with metrale.tag("data"):
            # The target is the next token, (t + 1) mod vocab: learnable.
            tokens = torch.randint(vocab, (b, n), device=device)
            target = (tokens + 1) % vocab
        logits = model(tokens)
        loss = loss_fn(logits.reshape(-1, vocab), target.reshape(-1))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        with metrale.tag("optimizer.step"):
            opt.step()
        value = loss.item()  # syncs, as most training loops do every step
        t1 = time.perf_counter()
        metrale.reset_hook_tags()
        if step >= warmup:
            times.append((t1 - t0) * 1e3)
            losses.append(value)
            if probe is not None:
                ns1, n1 = probe_now(probe)
                alloc_us.append((ns1 - ns0) / 1e3)
                calls.append(n1 - n0)
    torch.cuda.synchronize()
    result = {"config": config, "steps": steps, "warmup": warmup, "step_ms": times,
              "loss_first": statistics.fmean(losses[:10]), "loss_last": statistics.fmean(losses[-10:]),
              "torch_version": torch.__version__, "device": torch.cuda.get_device_name(0)}
    if probe is not None:
        result["alloc_free_us"] = alloc_us
        result["allocs_per_step"] = calls
    if ours:
        ctx = alloc.context(0)
        stats = ctx.pool_stats()
        result["peak_reserved_bytes"] = stats["reserved_bytes"]
        result["peak_in_use_bytes"] = stats["peak_in_use_bytes"]
        result["pool"] = stats
        result["counters"] = ctx.counters()
        result["live_count"] = ctx.live_count()
        result["report_by_tag"] = ctx.report_by_tag(top_n=20)
        result["report_by_site"] = ctx.report(top_n=5)
        result["violations"] = alloc.scan()
    elif config == ANCHOR:
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["peak_in_use_bytes"] = torch.cuda.max_memory_allocated()
    else:  # the floor: no figures of its own beyond step time and call costs
        result["peak_reserved_bytes"] = 0
        result["peak_in_use_bytes"] = 0
    with open(out_path, "w") as f:
        json.dump(result, f)


def quantile(xs, p):
    xs = sorted(xs)
    rank = p * (len(xs) - 1)
    lo = int(rank)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] * (1 - (rank - lo)) + xs[hi] * (rank - lo)


def mib(n):
    return f"{n / 2**20:.1f} MiB"


def run_rounds(args, work):
    runs = {c: [] for c in args.configs}
    errors = []
    for r in range(args.rounds):
        for config in args.configs:
            out = os.path.join(work, f"{config}-{r}.json")
            cmd = [sys.executable, os.path.abspath(__file__), "--child", config, "--steps",
                   str(args.steps), "--warmup", str(args.warmup), "--json", out]
            print(f"torch_training: round {r + 1}/{args.rounds}: {config}", flush=True)
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout)
            except subprocess.TimeoutExpired:
                errors.append(f"{config} round {r + 1}: over {args.timeout} s (--timeout)")
                continue
            if p.returncode != 0 or not os.path.exists(out):
                tail = (p.stderr or p.stdout).strip().splitlines()[-15:]
                errors.append(f"{config} round {r + 1}: exit {p.returncode}: " + " | ".join(tail))
                print("\n".join(tail), file=sys.stderr)
                continue
            with open(out) as f:
                runs[config].append(json.load(f))
    return runs, errors


def summarize(runs, errors):
    rows, checks = {}, list(errors)
    for config, rs in runs.items():
        if not rs:
            checks.append(f"{config}: no successful run")
            continue
        medians = [statistics.median(x["step_ms"]) for x in rs]
        all_ms = [t for x in rs for t in x["step_ms"]]
        best = rs[medians.index(statistics.median_low(medians))]
        rows[config] = {"median_ms": statistics.median(medians), "p10_ms": quantile(all_ms, 0.1),
                        "p90_ms": quantile(all_ms, 0.9), "round_medians_ms": medians,
                        "peak_reserved_bytes": max(x["peak_reserved_bytes"] for x in rs),
                        "peak_in_use_bytes": max(x["peak_in_use_bytes"] for x in rs),
                        "example": best}
        if "alloc_free_us" in rs[0]:
            rows[config]["alloc_free_us"] = statistics.median(
                [statistics.median(x["alloc_free_us"]) for x in rs])
            rows[config]["allocs_per_step"] = statistics.median(
                [statistics.median(x["allocs_per_step"]) for x in rs])
        for x in rs:
            if not (x["loss_last"] == x["loss_last"]) or x["loss_last"] >= x["loss_first"]:
                checks.append(f"{config}: loss did not fall ({x['loss_first']:.3f} -> "
                              f"{x['loss_last']:.3f})")
            if config in OURS:
                if x["pool"]["blocks_in_use"] == 0 or x["live_count"] == 0:
                    checks.append(f"{config}: nothing on the ledger: PyTorch did not allocate "
                                  "through libmetrale_gpu")
                if x["violations"]:
                    v = x["violations"][0]
                    checks.append(f"{config}: {len(x['violations'])} red-zone violation(s); "
                                  f"first: tag {v['tag']} at {v['file']}:{v['line']}")
    # Every config replays the same seeded shapes, so step i of round r has
    # the same tensor sizes in every config: the per-step ratio against the
    # anchor's same step removes the spread that the changing shapes cause.
    anchor_runs = runs.get(ANCHOR) or []
    for config, r in rows.items():
        if config == ANCHOR:
            continue
        ratios = [a / b for mine, ref in zip(runs[config], anchor_runs)
                  for a, b in zip(mine["step_ms"], ref["step_ms"]) if b > 0]
        r["paired_ratio"] = statistics.median(ratios) if ratios else None
    return rows, checks


def write(rows, checks, args):
    anchor = rows.get(ANCHOR)
    results = []
    for config, r in rows.items():
        side = "library" if config in OURS else ("reference" if config in PROBED else "anchor")
        step = {"id": f"training/torch/step_time/{config}", "group": "training_torch",
                "variant": config, "side": side, "unit": "ms/step", "median": r["median_ms"],
                "p10": r["p10_ms"], "p90": r["p90_ms"], "repeats": len(r["round_medians_ms"]),
                "batch": args.steps, "program": "torch_training",
                "timing": "one training step (forward, backward, AdamW step, loss.item()), "
                          "median over steps per round, median over rounds"}
        mem = {"id": f"training/torch/peak_reserved/{config}", "group": "training_torch",
               "variant": config, "side": side, "unit": "bytes",
               "median": r["peak_reserved_bytes"], "peak_in_use_bytes": r["peak_in_use_bytes"],
               "program": "torch_training"}
        step["round_medians"] = r["round_medians_ms"]
        if config in OURS:
            step["pool"] = r["example"].get("pool")
        if "alloc_free_us" in r:
            step["alloc_free_us_per_step"] = r["alloc_free_us"]
            step["allocs_per_step"] = r["allocs_per_step"]
        if r.get("paired_ratio") is not None:
            step["paired_ratio_median"] = r["paired_ratio"]
        if anchor and config != ANCHOR:
            step["raw_ref"] = f"training/torch/step_time/{ANCHOR}"
            step["ratio"] = r["median_ms"] / anchor["median_ms"]
            mem["raw_ref"] = f"training/torch/peak_reserved/{ANCHOR}"
            mem["ratio"] = r["peak_reserved_bytes"] / max(1, anchor["peak_reserved_bytes"])
            if "pluggable_floor" in rows and config in OURS:
                step["floor_ratio"] = r["median_ms"] / rows["pluggable_floor"]["median_ms"]
            if config == "library_pool":
                step["target"] = {"kind": "ratio", "max": 1.02}
                step["target_met"] = step["ratio"] <= 1.02
        if config in OURS:
            ex = r["example"]
            step["violations"] = len(ex["violations"])
            step["report_by_tag"] = ex["report_by_tag"]
        results += [step] if config == "pluggable_floor" else [step, mem]
    example = next(iter(rows.values()))["example"] if rows else {}
    date = datetime.datetime.now(datetime.timezone.utc)
    meta = {"date": date.isoformat(timespec="seconds"), "hostname": socket.gethostname(),
            "device_name": example.get("device"), "torch_version": example.get("torch_version"),
            "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
            # As bench/run.sh: BENCH_GIT_COMMIT where the tree has no (or a stale) .git.
            "git_commit": os.environ.get("BENCH_GIT_COMMIT") or subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                capture_output=True, text=True).stdout.strip(),
            "checks_failed": checks, "skipped_configs": args.skipped}
    # A folder that is not there yet is made: a run of several minutes must
    # not end in a FileNotFoundError with its figures lost.
    os.makedirs(args.out, exist_ok=True)
    # Named after the GPU, as bench/run.sh names its files ("nvidia-h200").
    slug = re.sub(r"[^a-z0-9]+", "-", (meta["device_name"] or socket.gethostname()).lower())
    stem = os.path.join(args.out, f"{date:%Y-%m-%d}-torch-training-{slug.strip('-')}")
    with open(stem + ".json", "w") as f:
        json.dump({"schema": "metrale-bench/1", "meta": meta, "results": results,
                   "skipped": []}, f, indent=1)
    md = [f"# torch training on libmetrale_gpu — {meta['device_name']}", "",
          f"- date: {meta['date']}; commit: {meta['git_commit']}; torch {meta['torch_version']}",
          f"- a 4-layer transformer (d=512, vocab 4096), batch 8-32 x seq 64-256 changing every "
          f"step; {args.steps} steps after {args.warmup} warm-up, {args.rounds} rounds per "
          f"config (ABC order), each config in its own process; module-tag hooks in all configs",
          "- vs torch: ratio of the medians; paired: median over steps of this step's time over "
          "torch's time for the same step (same round, same shapes); vs floor: ratio of the "
          "medians to pluggable_floor (the same CUDAPluggableAllocator path with an exact-size "
          "cache behind it)",
          *([f"- skipped: {s}" for s in args.skipped]),
          "", "| row | median | p10–p90 | vs torch | paired | vs floor | peak reserved | vs torch | goal | met |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    floor = rows.get("pluggable_floor")
    for config, r in rows.items():
        ratio = f"{r['median_ms'] / anchor['median_ms']:.3f}×" if anchor and config != ANCHOR else ""
        mratio = (f"{r['peak_reserved_bytes'] / max(1, anchor['peak_reserved_bytes']):.3f}×"
                  if anchor and config != ANCHOR else "")
        goal = "≤ 1.02×" if config == "library_pool" else ("reported" if config != ANCHOR else "")
        met = ""
        if config == "library_pool" and anchor:
            met = "met" if r["median_ms"] / anchor["median_ms"] <= 1.02 else "**missed**"
        vs_floor = (f"{r['median_ms'] / floor['median_ms']:.3f}×"
                    if floor and config in OURS else "")
        reserved = mib(r["peak_reserved_bytes"]) if config != "pluggable_floor" else "—"
        if config == "pluggable_floor":
            mratio, goal = "", "reference"
        md.append(f"| training/torch/{config} | {r['median_ms']:.2f} ms | {r['p10_ms']:.2f}–"
                  f"{r['p90_ms']:.2f} ms | {ratio} | "
                  f"{'' if r.get('paired_ratio') is None else format(r['paired_ratio'], '.3f') + '×'} | {vs_floor} | {reserved} | {mratio} "
                  f"| {goal} | {met} |")
    timed = [(c, r) for c, r in rows.items() if "alloc_free_us" in r]
    if timed:
        md += ["", "## The allocator's own CPU time per step", "",
               "Time inside the alloc and free calls torch makes during one step (median over "
               "steps, median over rounds), measured by the probe around each call. The "
               "allocator is called from torch's Python thread and its autograd thread, with "
               "the CPU caches full of whatever torch ran last.", "",
               "| config | alloc+free per step | allocs per step | per alloc+free pair | share of the step |",
               "| --- | --- | --- | --- | --- |"]
        for c, r in timed:
            n = max(1.0, r["allocs_per_step"])
            md.append(f"| {c} | {r['alloc_free_us']:.0f} µs | {r['allocs_per_step']:.0f} | "
                      f"{r['alloc_free_us'] * 1e3 / n:.0f} ns | "
                      f"{r['alloc_free_us'] / 1e3 / r['median_ms'] * 100:.1f} % |")
    for config in ("library_pool_rz64", "library_pool"):
        if config in rows:
            ex = rows[config]["example"]
            md += ["", f"## Ledger by tag after training ({config}; the red-zone scan found "
                   f"{len(ex['violations'])} violations)", "", "```", ex["report_by_tag"].rstrip(),
                   "```"]
            break
    md += ["", "## Pool counters at the end of training (the run whose median is the config's figure)", ""]
    for config, r in rows.items():
        pool = r["example"].get("pool")
        if pool:
            md.append(f"- {config}: " + ", ".join(f"{k} {v}" for k, v in pool.items()))
            counters = r["example"].get("counters") or {}
            md.append(f"  - counters: " + ", ".join(f"{k} {v}" for k, v in counters.items()
                                                    if k != "struct_size"))
    md += ["", "## Checks", ""] + ([f"- FAILED: {c}" for c in checks] or ["- all passed"])
    with open(stem + ".md", "w") as f:
        f.write("\n".join(md) + "\n")
    return stem


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--steps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=4)
    ap.add_argument("--configs", default=",".join(CONFIGS),
                    help="comma-separated configs to run (default: all; the anchor always runs)")
    ap.add_argument("--timeout", type=int, default=600, help="seconds per child")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("METRALE_BUILD_DIR", os.path.join(ROOT, "build"))
    wanted = [c for c in args.configs.split(",") if c]
    unknown = [c for c in wanted if c not in CONFIGS]
    if unknown:
        ap.error(f"unknown config(s) {', '.join(unknown)}; known: {', '.join(CONFIGS)}")
    args.configs = [ANCHOR] + [c for c in CONFIGS if c in wanted and c != ANCHOR]
    args.skipped = []
    if not args.child and not os.path.exists(probe_path()):
        args.skipped = [f"{c}: {probe_path()} is not there (build bench/)"
                        for c in args.configs if c in PROBED]
        args.configs = [c for c in args.configs if c not in PROBED]
    if args.child:
        child(args.child, args.steps, args.warmup, args.json)
        return 0
    try:
        import torch

        if not torch.cuda.is_available():
            print("torch_training: torch sees no CUDA device", file=sys.stderr)
            return 2
    except ImportError as e:
        print(f"torch_training: needs torch ({e})", file=sys.stderr)
        return 2
    with tempfile.TemporaryDirectory() as work:
        runs, errors = run_rounds(args, work)
    rows, checks = summarize(runs, errors)
    stem = write(rows, checks, args)
    print(open(stem + ".md").read())
    print(f"torch_training: wrote {stem}.json and {stem}.md")
    return 1 if checks else 0


if __name__ == "__main__":
    sys.exit(main())
