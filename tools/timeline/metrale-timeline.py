#!/usr/bin/env python3
"""metrale-timeline: turns a libmetrale_gpu event log into one HTML page.

The page needs no network: data, script and style are inline, the chart is
SVG drawn by the inline script. It shows live bytes over time stacked by
allocation site (or tag), marks the peak, out-of-memory failures and scans,
and gives the figures at any moment on hover.

Usage: metrale-timeline LOG [-o OUT.html] [--by site|tag] [--top N]
                             [--title TEXT] [--max-points N] [--screenshot PNG]
The log format is described in docs/event-log.md. Python 3 stdlib only.
"""
import argparse
import collections
import heapq
import html
import json
import os
import shutil
import subprocess
import sys
import tempfile

OTHER = "(other sites)"


def read_log(path):
    """Events per context, each list in seq order; a bad line is an error."""
    per_ctx = collections.defaultdict(list)
    with open(path, encoding="utf-8", errors="replace") as f:
        for n, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                ev = json.loads(line)
            except ValueError as e:
                raise SystemExit(f"metrale-timeline: {path}:{n}: not JSON: {e}")
            if not isinstance(ev, dict) or not isinstance(ev.get("seq"), int) \
                    or not isinstance(ev.get("t_ns"), int) or not isinstance(ev.get("ev"), str):
                raise SystemExit(f"metrale-timeline: {path}:{n}: needs \"ev\", \"seq\" and \"t_ns\"")
            per_ctx[ev.get("ctx", "")].append(ev)
    for evs in per_ctx.values():
        evs.sort(key=lambda e: e["seq"])
        # seq is the order; times of one context are made non-decreasing.
        last = 0
        for e in evs:
            last = max(last, e["t_ns"])
            e["t_ns"] = last
    return per_ctx


def merged(per_ctx):
    """All contexts' events in time order (each context's in seq order)."""
    lists = [evs for _, evs in sorted(per_ctx.items())]
    return heapq.merge(*[[(e["t_ns"], i, k, e) for k, e in enumerate(evs)]
                         for i, evs in enumerate(lists)])


def series_key(ev, by):
    if by == "tag" and ev.get("tag") is not None:
        return str(ev["tag"])
    return ev.get("site") or "<no site>"


def build(per_ctx, by, top, max_points):
    live = collections.defaultdict(int)    # series -> live bytes
    owners = collections.defaultdict(collections.deque)  # (ctx, ptr) -> [(key, bytes)]
    peak_of = collections.defaultdict(int)  # series -> its own peak
    samples = []   # (t, total, {series: bytes}) after each memory event
    marks = []     # OOMs and scans
    counts = collections.Counter()
    t0 = None
    total = 0
    for t, _, _, ev in merged(per_ctx):
        kind = ev["ev"]
        counts[kind] += 1
        if kind not in ("alloc", "free", "oom", "scan"):
            continue
        if t0 is None:
            t0 = t  # the time axis starts at the first memory event, not at the open
        if kind == "alloc":
            key = series_key(ev, by)
            owners[(ev.get("ctx"), ev.get("ptr"))].append((key, ev.get("bytes", 0)))
            live[key] += ev.get("bytes", 0)
            total += ev.get("bytes", 0)
            peak_of[key] = max(peak_of[key], live[key])
        elif kind == "free":
            q = owners.get((ev.get("ctx"), ev.get("ptr")))
            if not q:
                counts["unmatched_free"] += 1  # allocated before the log began
                continue
            key, b = q.popleft()
            live[key] -= b
            total -= b
        elif kind in ("oom", "scan"):
            marks.append({"t": (t - t0) / 1e9, "kind": kind, "bytes": ev.get("bytes", 0),
                          "site": ev.get("site"), "violations": ev.get("violations", 0)})
            continue
        else:
            continue
        samples.append((t, total, dict(live)))
    if t0 is None:
        t0 = 0
    names = sorted(peak_of, key=lambda k: (-peak_of[k], k))
    shown = names[:top]
    rest = names[top:]
    peak_i = max(range(len(samples)), key=lambda i: samples[i][1]) if samples else -1

    # Downsampling keeps, per bucket, the sample with the most bytes (and
    # always the peak), so no peak is smoothed away.
    keep = list(range(len(samples)))
    if len(samples) > max_points:
        per = len(samples) / max_points
        buckets = collections.OrderedDict()
        for i in keep:
            b = int(i / per)
            if b not in buckets or samples[i][1] > samples[buckets[b]][1]:
                buckets[b] = i
        keep = sorted(set(buckets.values()) | {peak_i, 0, len(samples) - 1})
    pts = []
    for i in keep:
        t, tot, lv = samples[i]
        row = [lv.get(k, 0) for k in shown]
        if rest:
            row.append(sum(lv.get(k, 0) for k in rest))
        pts.append({"t": (t - t0) / 1e9, "total": tot, "v": row})
    series = shown + ([OTHER] if rest else [])
    peaks = [peak_of[k] for k in shown] + ([max((p["v"][-1] for p in pts), default=0)] if rest else [])
    peak = None
    if peak_i >= 0:
        t, tot, lv = samples[peak_i]
        peak = {"t": (t - t0) / 1e9, "bytes": tot,
                "top": sorted(((k, v) for k, v in lv.items() if v > 0), key=lambda kv: -kv[1])[:5]}
    return {"series": series, "series_peak": peaks, "points": pts, "peak": peak,
            "marks": marks[:2000], "counts": dict(counts), "by": by,
            "contexts": len(per_ctx)}


PAGE = """<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8">
<title>__TITLE__</title>
<style>
body{font:14px system-ui,sans-serif;margin:16px;color:#222;background:#fff}
h1{font-size:18px;margin:0 0 4px} .sub{color:#555;margin-bottom:8px}
#chart{position:relative} svg{display:block}
.axis text{font-size:11px;fill:#555} .axis line,.axis path{stroke:#999}
#tip{position:absolute;pointer-events:none;background:rgba(255,255,255,.95);border:1px solid #888;
 padding:6px 8px;font-size:12px;display:none;white-space:nowrap;box-shadow:0 1px 4px rgba(0,0,0,.2)}
#legend{list-style:none;padding:0;margin:8px 0;display:flex;flex-wrap:wrap;gap:4px 16px}
#legend li{display:flex;align-items:center;gap:6px;font-size:12px}
#legend .sw{width:12px;height:12px;display:inline-block}
</style></head><body>
<h1>__TITLE__</h1>
<div class="sub" id="summary"></div>
<div id="chart"><div id="tip"></div></div>
<ul id="legend"></ul>
<script type="application/json" id="data">__DATA__</script>
<script>
"use strict";
(function () {
  const D = JSON.parse(document.getElementById("data").textContent);
  const NS = "http://www.w3.org/2000/svg";
  const W = 1100, H = 480, L = 80, R = 50, T = 20, B = 40;
  const colors = ["#4e79a7","#f28e2b","#e15759","#76b7b2","#59a14f","#edc948","#b07aa1",
                  "#ff9da7","#9c755f","#bab0ac","#1f77b4","#8c564b"];
  const fmt = b => { const u = ["B","KiB","MiB","GiB","TiB"]; let i = 0; let v = b;
    while (v >= 1024 && i < u.length - 1) { v /= 1024; i++; } return (i ? v.toFixed(1) : v) + " " + u[i]; };
  const P = D.points, S = D.series;
  const tmax = P.length ? Math.max(P[P.length - 1].t, 1e-9) : 1;
  const ymax = Math.max(1, ...P.map(p => p.total));
  const x = t => L + (W - L - R) * t / tmax, y = b => H - B - (H - T - B) * b / ymax;
  const el = (n, a, parent) => { const e = document.createElementNS(NS, n);
    for (const k in a) e.setAttribute(k, a[k]); if (parent) parent.appendChild(e); return e; };
  const svg = el("svg", {width: W, height: H, viewBox: `0 0 ${W} ${H}`, id: "svg"});
  document.getElementById("chart").prepend(svg);
  // Stacked areas, step-wise: bytes stay as they are until the next event.
  const base = P.map(() => 0);
  S.forEach((name, s) => {
    let top = "", bottom = "";
    P.forEach((p, i) => {
      const x0 = x(p.t), x1 = i + 1 < P.length ? x(P[i + 1].t) : x0;
      const lo = base[i], hi = lo + p.v[s];
      top += `${i ? "L" : "M"}${x0.toFixed(2)},${y(hi).toFixed(2)}L${x1.toFixed(2)},${y(hi).toFixed(2)}`;
      bottom = `L${x1.toFixed(2)},${y(lo).toFixed(2)}L${x0.toFixed(2)},${y(lo).toFixed(2)}` + bottom;
      base[i] = hi;
    });
    const path = el("path", {d: P.length ? top + bottom + "Z" : "", fill: colors[s % colors.length],
      "fill-opacity": 0.85, stroke: "none", class: "area"}, svg);
    path.dataset.series = name;
    path.dataset.points = String(P.length);
    path.dataset.max = String(P.reduce((m, p) => Math.max(m, p.v[s]), 0));  // as drawn
    const li = document.createElement("li");
    li.className = "series";
    li.dataset.series = name;
    li.dataset.points = String(P.length);
    li.dataset.peak = String(D.series_peak[s]);
    li.innerHTML = `<span class="sw" style="background:${colors[s % colors.length]}"></span>`;
    li.appendChild(document.createTextNode(`${name} (peak ${fmt(D.series_peak[s])})`));
    document.getElementById("legend").appendChild(li);
  });
  // Axes.
  const ax = el("g", {class: "axis"}, svg);
  el("line", {x1: L, y1: H - B, x2: W - R, y2: H - B}, ax);
  el("line", {x1: L, y1: T, x2: L, y2: H - B}, ax);
  for (let k = 0; k <= 5; k++) {
    const b = ymax * k / 5, t = tmax * k / 5;
    el("text", {x: L - 6, y: y(b) + 4, "text-anchor": "end"}, ax).textContent = fmt(Math.round(b));
    el("text", {x: x(t), y: H - B + 16, "text-anchor": "middle"}, ax).textContent = t.toPrecision(3) + " s";
  }
  // Out-of-memory failures (red) and scans (violet) along the top.
  for (const m of D.marks) {
    const c = m.kind === "oom" ? "#d00" : "#7b3fb5";
    const mk = el("line", {x1: x(m.t), x2: x(m.t), y1: T, y2: T + 10, stroke: c, "stroke-width": 2,
      class: "mark-" + m.kind}, svg);
    el("title", {}, mk).textContent = m.kind === "oom" ? `out of memory: ${fmt(m.bytes)} at ${m.site}`
                                                      : `scan: ${m.violations} violations`;
  }
  // The peak.
  const peak = document.createElement("div");
  peak.id = "peak";
  if (D.peak) {
    el("line", {x1: x(D.peak.t), x2: x(D.peak.t), y1: T, y2: H - B, stroke: "#000",
      "stroke-dasharray": "4 3", id: "peak-line"}, svg);
    const lbl = el("text", {x: Math.min(x(D.peak.t) + 4, W - 200), y: y(D.peak.bytes) - 6,
      "font-size": 12, "font-weight": "bold"}, svg);
    lbl.textContent = `peak ${fmt(D.peak.bytes)} at ${D.peak.t.toPrecision(4)} s`;
    peak.dataset.bytes = String(D.peak.bytes);
    peak.dataset.t = String(D.peak.t);
  }
  document.body.appendChild(peak);
  const c = D.counts;
  document.getElementById("summary").textContent =
    `${c.alloc || 0} allocs, ${c.free || 0} frees, ${c.oom || 0} out of memory, ${c.scan || 0} scans` +
    ` in ${D.contexts} context(s); stacked by ${D.by}; ` +
    (D.peak ? `peak ${fmt(D.peak.bytes)}` : "no allocations");
  // Hover: the figures at the moment under the pointer.
  const tip = document.getElementById("tip");
  const cursor = el("line", {y1: T, y2: H - B, stroke: "#555", visibility: "hidden"}, svg);
  svg.addEventListener("mousemove", ev => {
    if (!P.length) return;
    const r = svg.getBoundingClientRect();
    const t = (ev.clientX - r.left - L) / (W - L - R) * tmax;
    let lo = 0, hi = P.length - 1;
    while (lo < hi) { const m = (lo + hi + 1) >> 1; if (P[m].t <= t) lo = m; else hi = m - 1; }
    const p = P[lo];
    cursor.setAttribute("x1", x(p.t)); cursor.setAttribute("x2", x(p.t));
    cursor.setAttribute("visibility", "visible");
    const rows = S.map((n, s) => [n, p.v[s]]).filter(r => r[1] > 0).sort((a, b) => b[1] - a[1]);
    tip.innerHTML = "";
    const head = document.createElement("b");
    head.textContent = `${p.t.toPrecision(4)} s: ${fmt(p.total)} live`;
    tip.appendChild(head);
    for (const [n, b] of rows.slice(0, 10)) {
      const d = document.createElement("div"); d.textContent = `${fmt(b)}  ${n}`; tip.appendChild(d);
    }
    tip.style.display = "block";
    tip.style.left = (ev.clientX - r.left + 12) + "px";
    tip.style.top = (ev.clientY - r.top + 12) + "px";
  });
  svg.addEventListener("mouseleave", () => { tip.style.display = "none";
    cursor.setAttribute("visibility", "hidden"); });
  document.body.dataset.series = String(S.length);
  document.body.dataset.rendered = "1";
})();
</script></body></html>
"""


def render(model, title):
    data = json.dumps(model, separators=(",", ":"))
    # Inside <script>: "</" would end the element early.
    data = data.replace("</", "<\\/")
    return PAGE.replace("__TITLE__", html.escape(title)).replace("__DATA__", data)


def screenshot(page, png):
    """Draws page in headless Chromium and saves png (1200x720)."""
    exe = next((shutil.which(n) for n in ("chromium", "chromium-browser", "google-chrome")
                if shutil.which(n)), None)
    if exe is None:
        raise SystemExit("metrale-timeline: --screenshot needs chromium (Debian: apt-get install chromium)")
    with tempfile.TemporaryDirectory() as profile:
        cmd = [exe, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--no-first-run", "--hide-scrollbars", f"--user-data-dir={profile}",
               "--virtual-time-budget=5000", "--window-size=1200,720",
               f"--screenshot={os.path.abspath(png)}", "file://" + os.path.abspath(page)]
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=120)
    if p.returncode != 0 or not os.path.exists(png):
        raise SystemExit(f"metrale-timeline: chromium failed ({p.returncode}): {p.stderr[-500:]}")


def main(argv=None):
    ap = argparse.ArgumentParser(prog="metrale-timeline", description=__doc__.split("\n")[0])
    ap.add_argument("log")
    ap.add_argument("-o", "--output", help="HTML file to write (default: LOG.html)")
    ap.add_argument("--by", choices=["site", "tag"], default="site",
                    help="stack by allocation site or by tag (untagged: site)")
    ap.add_argument("--top", type=int, default=8, help="series drawn; the rest are summed")
    ap.add_argument("--title", help="page title (default: the log's name)")
    ap.add_argument("--max-points", type=int, default=4000,
                    help="samples drawn at most (the largest per interval are kept)")
    ap.add_argument("--screenshot", metavar="PNG",
                    help="also draw the page in headless Chromium and save it as PNG")
    a = ap.parse_args(argv)
    if a.top < 1 or a.max_points < 2:
        ap.error("--top must be >= 1 and --max-points >= 2")
    try:
        per_ctx = read_log(a.log)
    except OSError as e:
        raise SystemExit(f"metrale-timeline: {a.log}: {e.strerror}")
    model = build(per_ctx, a.by, a.top, a.max_points)
    out = a.output or a.log + ".html"
    with open(out, "w", encoding="utf-8") as f:
        f.write(render(model, a.title or f"memory timeline: {a.log}"))
    if a.screenshot:
        screenshot(out, a.screenshot)
    peak = model["peak"]["bytes"] if model["peak"] else 0
    print(f"metrale-timeline: wrote {out}: {len(model['series'])} series, "
          f"{len(model['points'])} points, peak {peak} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
