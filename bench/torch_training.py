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
}
ANCHOR = "torch_caching"


def child(config, steps, warmup, out_path):
    """One config in this process: train, measure, write a JSON result."""
    import metrale
    import torch

    ours = config != ANCHOR
    alloc = None
    if ours:
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
    losses, times = [], []
    import time

    for step in range(warmup + steps):
        b = batches[int(torch.randint(len(batches), (1,), generator=gen))]
        n = lengths[int(torch.randint(len(lengths), (1,), generator=gen))]
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
    torch.cuda.synchronize()
    result = {"config": config, "steps": steps, "warmup": warmup, "step_ms": times,
              "loss_first": statistics.fmean(losses[:10]), "loss_last": statistics.fmean(losses[-10:]),
              "torch_version": torch.__version__, "device": torch.cuda.get_device_name(0)}
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
    else:
        result["peak_reserved_bytes"] = torch.cuda.max_memory_reserved()
        result["peak_in_use_bytes"] = torch.cuda.max_memory_allocated()
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
    runs = {c: [] for c in CONFIGS}
    errors = []
    for r in range(args.rounds):
        for config in CONFIGS:
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
        for x in rs:
            if not (x["loss_last"] == x["loss_last"]) or x["loss_last"] >= x["loss_first"]:
                checks.append(f"{config}: loss did not fall ({x['loss_first']:.3f} -> "
                              f"{x['loss_last']:.3f})")
            if config != ANCHOR:
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
        side = "anchor" if config == ANCHOR else "library"
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
        if config != ANCHOR:
            step["pool"] = r["example"].get("pool")
        if r.get("paired_ratio") is not None:
            step["paired_ratio_median"] = r["paired_ratio"]
        if anchor and config != ANCHOR:
            step["raw_ref"] = f"training/torch/step_time/{ANCHOR}"
            step["ratio"] = r["median_ms"] / anchor["median_ms"]
            mem["raw_ref"] = f"training/torch/peak_reserved/{ANCHOR}"
            mem["ratio"] = r["peak_reserved_bytes"] / max(1, anchor["peak_reserved_bytes"])
            if config == "library_pool":
                step["target"] = {"kind": "ratio", "max": 1.02}
                step["target_met"] = step["ratio"] <= 1.02
        if config != ANCHOR:
            ex = r["example"]
            step["violations"] = len(ex["violations"])
            step["report_by_tag"] = ex["report_by_tag"]
        results += [step, mem]
    example = next(iter(rows.values()))["example"] if rows else {}
    date = datetime.datetime.now(datetime.timezone.utc)
    meta = {"date": date.isoformat(timespec="seconds"), "hostname": socket.gethostname(),
            "device_name": example.get("device"), "torch_version": example.get("torch_version"),
            "steps": args.steps, "warmup": args.warmup, "rounds": args.rounds,
            # As bench/run.sh: BENCH_GIT_COMMIT where the tree has no (or a stale) .git.
            "git_commit": os.environ.get("BENCH_GIT_COMMIT") or subprocess.run(
                ["git", "-C", ROOT, "rev-parse", "--short", "HEAD"],
                capture_output=True, text=True).stdout.strip(),
            "checks_failed": checks}
    # A folder that is not there yet is made: a run of several minutes must
    # not end in a FileNotFoundError with its figures lost.
    os.makedirs(args.out, exist_ok=True)
    stem = os.path.join(args.out, f"{date:%Y-%m-%d}-torch-training-{socket.gethostname()}")
    with open(stem + ".json", "w") as f:
        json.dump({"schema": "metrale-bench/1", "meta": meta, "results": results,
                   "skipped": []}, f, indent=1)
    md = [f"# torch training on libmetrale_gpu — {meta['device_name']}", "",
          f"- date: {meta['date']}; commit: {meta['git_commit']}; torch {meta['torch_version']}",
          f"- a 4-layer transformer (d=512, vocab 4096), batch 8-32 x seq 64-256 changing every "
          f"step; {args.steps} steps after {args.warmup} warm-up, {args.rounds} rounds per "
          f"config (ABC order), each config in its own process; module-tag hooks in all configs",
          "- vs torch: ratio of the medians; paired: median over steps of this step's time over "
          "torch's time for the same step (same round, same shapes)",
          "", "| row | median | p10–p90 | vs torch | paired | peak reserved | vs torch | goal | met |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for config, r in rows.items():
        ratio = f"{r['median_ms'] / anchor['median_ms']:.3f}×" if anchor and config != ANCHOR else ""
        mratio = (f"{r['peak_reserved_bytes'] / max(1, anchor['peak_reserved_bytes']):.3f}×"
                  if anchor and config != ANCHOR else "")
        goal = "≤ 1.02×" if config == "library_pool" else ("reported" if config != ANCHOR else "")
        met = ""
        if config == "library_pool" and anchor:
            met = "met" if r["median_ms"] / anchor["median_ms"] <= 1.02 else "**missed**"
        md.append(f"| training/torch/{config} | {r['median_ms']:.2f} ms | {r['p10_ms']:.2f}–"
                  f"{r['p90_ms']:.2f} ms | {ratio} | "
                  f"{'' if r.get('paired_ratio') is None else format(r['paired_ratio'], '.3f') + '×'} | {mib(r['peak_reserved_bytes'])} | {mratio} "
                  f"| {goal} | {met} |")
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
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--timeout", type=int, default=600, help="seconds per child")
    ap.add_argument("--out", default=os.path.join(HERE, "results"))
    ap.add_argument("--child", choices=list(CONFIGS), help=argparse.SUPPRESS)
    ap.add_argument("--json", help=argparse.SUPPRESS)
    args = ap.parse_args()
    os.environ.setdefault("METRALE_BUILD_DIR", os.path.join(ROOT, "build"))
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
