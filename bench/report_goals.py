"""The goal table of issue 10 (fast paths), from one run's merged results:
each goal with our figure, its anchor in the same run, the ratio and a
pass/miss mark. report.py appends it to the markdown; nothing is asserted.

A goal whose rows are not in the run says so ("not measured") instead of
passing; a goal that is only to be reported is marked "reported".
"""
import re

SIZES = ["256B", "4KiB", "64KiB", "1MiB", "16MiB", "64MiB"]
LIVES = [("live1k", 100.0), ("live1M", 150.0)]
TORCH_RATIO = 0.25
REDZONE_RATIO = 1.3
PAGEABLE_H2D_GBPS, PAGEABLE_D2H_GBPS = 50.0, 44.0
PINNED_NS = 1000.0
STAGING_THRESHOLD = 1 << 20  # METRALE_STAGING_DEFAULT_THRESHOLD
NO_REGRESSION = 1.02


def fmt_ns(v):
    if v is None:
        return "—"
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.0f} ns" if v >= 100 else f"{v:.1f} ns"


def fmt_bytes(v):
    if v is None:
        return "—"
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if v >= 1 << shift:
            return f"{v / (1 << shift):.2f} {unit}"
    return f"{v:.0f} B"


def mark(checks):
    """checks: list of (bool or None, what). pass when all hold; miss names
    what failed; n/a when a needed figure is absent."""
    if any(ok is False for ok, _ in checks):
        return "**miss** (" + "; ".join(w for ok, w in checks if ok is False) + ")"
    if any(ok is None for ok, _ in checks):
        return "n/a (" + "; ".join(w for ok, w in checks if ok is None) + ")"
    return "pass"


def goal_lines(results):
    by_id = {r["id"]: r for r in results}
    med = lambda i: by_id[i]["median"] if i in by_id else None  # noqa: E731
    rows = []

    def row(measure, ours, anchor, ratio, goal, m):
        rows.append(f"| {measure} | {ours} | {anchor} | {ratio} | {goal} | {m} |")

    def ratio_of(a, b):
        return a / b if a is not None and b else None

    def rtxt(r):
        return f"{r:.3f}×" if r is not None else "—"

    # 1. pooled alloc+free, ledger and site on: absolute and against torch.
    for live, limit in LIVES:
        for size in SIZES:
            ours = med(f"alloc_free/{size}/library_pool/{live}")
            torch = med(f"alloc_free/{size}/torch/{live}")
            r = ratio_of(ours, torch)
            if ours is None:
                row(f"alloc_free/{size}/library_pool/{live}", "not measured", "", "", "", "n/a")
                continue
            checks = [(ours <= limit, f"{ours:.1f} ns > {limit:g} ns"),
                      (None if r is None else r <= TORCH_RATIO,
                       "no torch row" if r is None else f"{r:.2f}× torch > {TORCH_RATIO}×")]
            row(f"alloc_free/{size}/library_pool/{live}", fmt_ns(ours),
                f"torch C++ {fmt_ns(torch)}", rtxt(r),
                f"≤ {fmt_ns(limit)}; ≤ {TORCH_RATIO}× torch", mark(checks))
    # 2. red zones on: against the pool without them.
    for live, _ in LIVES:
        for size in SIZES:
            rz = med(f"alloc_free/{size}/library_pool_redzone/{live}")
            base = med(f"alloc_free/{size}/library_pool/{live}")
            r = ratio_of(rz, base)
            if rz is None:
                row(f"alloc_free/{size}/library_pool_redzone/{live}", "not measured", "", "", "", "n/a")
                continue
            row(f"alloc_free/{size}/library_pool_redzone/{live}", fmt_ns(rz),
                f"pool without red zones {fmt_ns(base)}", rtxt(r), f"≤ {REDZONE_RATIO}× pool",
                mark([(None if r is None else r <= REDZONE_RATIO,
                       "no pool row" if r is None else f"{r:.2f}×")]))
    # 2b. the same with METRALE_REDZONE_REUSE=8 (an option: owners share a check).
    for live, _ in LIVES:
        for size in SIZES:
            rz = med(f"alloc_free/{size}/library_pool_redzone_reuse8/{live}")
            base = med(f"alloc_free/{size}/library_pool/{live}")
            if rz is None:
                continue
            r = ratio_of(rz, base)
            row(f"alloc_free/{size}/library_pool_redzone_reuse8/{live}", fmt_ns(rz),
                f"pool without red zones {fmt_ns(base)}", rtxt(r),
                f"≤ {REDZONE_RATIO}× pool (METRALE_REDZONE_REUSE=8)",
                mark([(None if r is None else r <= REDZONE_RATIO,
                       "no pool row" if r is None else f"{r:.2f}×")]))
    # 3. threads: scaling reported (figure = wall time / all pairs).
    one = med("alloc_free_threads/1/library_pool")
    one_raw = med("alloc_free_threads/1/raw_cuMemAllocAsync")
    for n in (1, 2, 4, 8, 16):
        ours = med(f"alloc_free_threads/{n}/library_pool")
        raw = med(f"alloc_free_threads/{n}/raw_cuMemAllocAsync")
        if ours is None:
            continue
        speed = f"{one / ours:.2f}× vs 1 thread" if one else ""
        raw_speed = f" ({one_raw / raw:.2f}× vs 1)" if raw and one_raw else ""
        row(f"alloc_free_threads/{n}/library_pool (wall/all pairs)", fmt_ns(ours),
            f"cuMemAllocAsync {fmt_ns(raw)}{raw_speed}", rtxt(ratio_of(ours, raw)),
            "scaling reported", f"reported: {speed}")
    # 4. the trace: time and peak reserved; our peak <= torch's.
    for r in results:
        m = re.match(r"trace_peak_reserved/(.+)/library_pool$", r["id"])
        if not m:
            continue
        name = m.group(1)
        t_ours = med(f"trace_step/{name}/library_pool")
        t_torch = med(f"trace_step/{name}/torch")
        t_drv = med(f"trace_step/{name}/raw_cuMemAllocAsync")
        row(f"trace_step/{name} (time per trace)", fmt_ns(t_ours),
            f"torch {fmt_ns(t_torch)}; driver pool {fmt_ns(t_drv)}", rtxt(ratio_of(t_ours, t_torch)),
            "reported", "reported")
        p_ours = r["median"]
        p_torch = med(f"trace_peak_reserved/{name}/torch")
        p_drv = med(f"trace_peak_reserved/{name}/raw_cuMemAllocAsync")
        ok = None if p_torch is None else p_ours <= p_torch
        row(f"trace_peak_reserved/{name}", fmt_bytes(p_ours),
            f"torch {fmt_bytes(p_torch)}; driver pool {fmt_bytes(p_drv)}",
            rtxt(ratio_of(p_ours, p_torch)), "≤ torch's peak",
            mark([(ok, "no torch row" if ok is None else "above torch's peak")]))
    # 5. pageable 1 GiB copies through the library.
    for d, limit in (("h2d", PAGEABLE_H2D_GBPS), ("d2h", PAGEABLE_D2H_GBPS)):
        i = f"copy_{d}_1GiB_pageable/library"
        g = by_id.get(i, {}).get("gbps")
        raw = by_id.get(f"copy_{d}_1GiB_pageable/raw_async_sync", {}).get("gbps")
        row(i, f"{g:.1f} GB/s" if g else "not measured",
            f"raw pageable {raw:.1f} GB/s" if raw else "", "", f"≥ {limit:g} GB/s",
            mark([(None if g is None else g >= limit, "not measured" if g is None else "below")]))
    # 6. pageable copies 64 KiB .. 16 MiB: reported, no regression below the threshold.
    for r in results:
        m = re.match(r"copy_(h2d|d2h)_(\d+)(KiB|MiB)_pageable/library$", r["id"])
        if not m:
            continue
        size = int(m.group(2)) << (10 if m.group(3) == "KiB" else 20)
        if not (64 << 10) <= size <= (16 << 20):
            continue
        ratio = r.get("ratio")
        below = size < STAGING_THRESHOLD
        row(r["id"], fmt_ns(r["median"]), r.get("raw_ref", ""), rtxt(ratio),
            f"no regression (≤ {NO_REGRESSION}× raw)" if below else "reported",
            mark([(None if ratio is None else ratio <= NO_REGRESSION, "slower than raw")])
            if below else "reported")
    # 7. pinned alloc+free of 1 MiB from the pinned pool.
    p = med("pinned_alloc_free/1MiB/library_pool")
    raw = med("pinned_alloc_free/1MiB/raw_cuMemHostAlloc")
    row("pinned_alloc_free/1MiB/library_pool", fmt_ns(p) if p is not None else "not measured",
        f"cuMemHostAlloc {fmt_ns(raw)}", rtxt(ratio_of(p, raw)), f"≤ {fmt_ns(PINNED_NS)}",
        mark([(None if p is None else p <= PINNED_NS, "not measured" if p is None else "slower")]))

    head = ["", "## Issue 10 goals", "",
            "Each goal with our figure and its anchor from this same run; ratio = ours / "
            "anchor. alloc+free rows hold 1k or 1M other 256 B blocks live. Threads: wall "
            "time / all pairs, so n threads scaling perfectly show n× vs 1 thread.", "",
            "| measure | ours | anchor (same run) | ratio | goal | mark |",
            "| --- | --- | --- | --- | --- | --- |"]
    return head + rows
