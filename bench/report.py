#!/usr/bin/env python3
"""Merges the JSON fragments of one bench run into one JSON document and a
short markdown table.

Adds the run's metadata (date, git commit, machine), and for every figure
with a raw_ref the ratio library/raw and the difference in ns; a figure
with a target is marked met or missed (nothing is asserted: the exit code
does not depend on targets).

Usage: report.py --json OUT.json --md OUT.md [--label TEXT] FRAGMENT.json...
"""
import argparse
import datetime
import json
import os
import platform
import socket
import subprocess
import sys

from report_goals import fmt_bytes, goal_lines


def git(*args):
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        return subprocess.run(["git", "-C", here, *args], capture_output=True, text=True,
                              check=True).stdout.strip()
    except Exception:  # noqa: BLE001 - no git, not a checkout: say so in the JSON
        return None


def cpu_model():
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or None


def load(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError) as ex:
        return {"program": os.path.basename(path), "meta": {}, "results": [],
                "skipped": [{"what": "whole program", "why": f"no readable JSON ({ex})"}]}


def fmt_ns(v):
    if v is None:
        return "—"
    if v < 0:  # a figure below its reference: the difference column
        return "-" + fmt_ns(-v)
    if v >= 1e6:
        return f"{v / 1e6:.2f} ms"
    if v >= 1e3:
        return f"{v / 1e3:.2f} µs"
    return f"{v:.0f} ns" if v >= 100 else f"{v:.1f} ns"


def judge(r, raw):
    t = r.get("target")
    if not t:
        return None
    kind, limit = t["kind"], t["max"]
    if kind == "ratio":
        return None if raw is None else r["ratio"] <= limit
    if kind == "diff_ns":
        return None if raw is None else r["diff_ns"] <= limit
    if kind == "abs_ns":
        return r["median"] <= limit
    return None


def target_text(t):
    if not t:
        return ""
    if t["kind"] == "ratio":
        return f"≤ {t['max']:g}× ref"
    if t["kind"] == "diff_ns":
        return f"≤ ref + {t['max']:g} ns"
    return f"≤ {fmt_ns(t['max'])}"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json", required=True)
    ap.add_argument("--md", required=True)
    ap.add_argument("--label", default="")
    ap.add_argument("fragments", nargs="+")
    a = ap.parse_args()

    meta = {
        "date": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        # BENCH_GIT_COMMIT: for a copy of the tree without .git (a GPU machine).
        "git_commit": os.environ.get("BENCH_GIT_COMMIT") or git("rev-parse", "HEAD"),
        "git_dirty": bool(git("status", "--porcelain", "--untracked-files=no")),
        "hostname": socket.gethostname(),
        "label": a.label,
        "cpu_model": cpu_model(),
        "cpu_count": os.cpu_count(),
        "nvidia_driver_version": os.environ.get("BENCH_NVIDIA_DRIVER") or None,
    }
    programs, results, skipped = {}, [], []
    for path in a.fragments:
        doc = load(path)
        name = doc.get("program", os.path.basename(path))
        programs[name] = doc.get("meta", {})
        for key in ("device_name", "driver_api_version"):
            if key in doc.get("meta", {}) and key not in meta:
                meta[key] = doc["meta"][key]
        for r in doc.get("results", []):
            r["program"] = name
            results.append(r)
        for s in doc.get("skipped", []):
            skipped.append({"program": name, **s})

    by_id = {r["id"]: r for r in results}
    for r in results:
        raw = by_id.get(r.get("raw_ref", ""))
        if raw is not None and raw.get("median"):
            r["ratio"] = r["median"] / raw["median"]
            r["diff_ns"] = r["median"] - raw["median"]
        if r.get("size_bytes", 0) >= (1 << 20) and r.get("median") and r.get("unit") == "ns/op":
            r["gbps"] = r["size_bytes"] / r["median"]  # bytes per ns = GB/s
        met = judge(r, raw)
        if r.get("target"):
            r["target_met"] = met

    doc = {"schema": "metrale-bench/1", "meta": meta, "programs": programs,
           "results": results, "skipped": skipped}
    with open(a.json, "w") as f:
        json.dump(doc, f, indent=1)
        f.write("\n")

    lines = [f"# libmetrale_gpu bench — {meta.get('device_name') or 'no device'}", ""]
    lines.append(f"- date: {meta['date']}; commit: {meta['git_commit'] or 'unknown'}"
                 f"{' (dirty)' if meta['git_dirty'] else ''}")
    if a.label:
        lines.append(f"- machine: {a.label}")
    lines.append(f"- cpu: {meta['cpu_model']} ({meta['cpu_count']} threads)")
    if meta.get("driver_api_version"):
        lines.append(f"- driver API version: {meta['driver_api_version']}"
                     + (f"; NVIDIA driver {meta['nvidia_driver_version']}"
                        if meta.get("nvidia_driver_version") else ""))
    lines += ["- per-op times: median over repeats (p10–p90); ratio = this figure's median / its "
              "reference's (raw_ref: the raw driver, or for pool rows the anchor or pool row "
              "named in the JSON); targets are reported, never asserted", ""]
    lines += ["| figure | side | median | p10–p90 | vs ref | − ref | GB/s | target | met |",
              "| --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for r in results:
        ratio = f"{r['ratio']:.3f}×" if "ratio" in r else ""
        diff = (f"{r['diff_ns']:+.0f} ns" if abs(r["diff_ns"]) < 1e4 else fmt_ns(r["diff_ns"])) \
            if "diff_ns" in r else ""
        fmt = fmt_ns
        if r.get("unit") == "bytes":  # peak reserved bytes: same columns, bytes
            fmt = fmt_bytes
            diff = fmt_bytes(abs(r["diff_ns"])) if "diff_ns" in r else ""
            if "diff_ns" in r:
                diff = ("+" if r["diff_ns"] >= 0 else "−") + diff
        gbps = f"{r['gbps']:.1f}" if "gbps" in r else ""
        met = {True: "met", False: "**missed**", None: "n/a"}[r["target_met"]] \
            if "target_met" in r else ""
        lines.append(f"| {r['id']} | {r['side']} | {fmt(r['median'])} | "
                     f"{fmt(r['p10'])}–{fmt(r['p90'])} | {ratio} | {diff} | {gbps} | "
                     f"{target_text(r.get('target'))} | {met} |")
    lines += goal_lines(results)
    if skipped:
        lines += ["", "## Not measured", ""]
        lines += [f"- {s['program']}: {s['what']}: {s['why']}" for s in skipped]
    lines.append("")
    with open(a.md, "w") as f:
        f.write("\n".join(lines))
    print(f"report: {len(results)} figures, {len(skipped)} skipped -> {a.json}, {a.md}")


if __name__ == "__main__":
    sys.exit(main())
