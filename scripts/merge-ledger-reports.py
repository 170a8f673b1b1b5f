#!/usr/bin/env python3
"""Merges the ledger reports of many ranks (metrale_alloc_report_all).

Each process of a multi-host job writes its own report (docs/scaling.md);
this sums them: per allocation site over every rank, largest first, with
how many ranks hold it and the largest single rank, then one line per rank
and device. Exact byte counts are read from the "(N bytes)" of each line.

    merge-ledger-reports.py REPORT... [--json]

A report's name (its file name without .txt) names its rank. A report made
with top_n or min_mib lists only some sites: the site totals then cover
what was listed, while the device lines stay exact.
"""
import json
import os
import re
import sys

DEVICE = re.compile(
    r"^(cuda|host) device (\d+): .*\((\d+) bytes\) in (\d+) allocations?, (\d+) contexts?$")
SITE = re.compile(r"^  .*\((\d+) bytes\) in (\d+) allocations? at (.+)$")
HEADER = re.compile(r"^live device memory by device and site, process (\d+) ")


def human(n):
    if n < 1024:
        return f"{n} B"
    v = n / 1024.0
    for unit in ("KiB", "MiB", "GiB"):
        if v < 1024.0:
            return f"{v:.1f} {unit}"
        v /= 1024.0
    return f"{v:.1f} TiB"


def parse(path):
    """[(device, bytes, count)], {site: (bytes, count)} of one report."""
    devices, sites, device = [], {}, None
    with open(path, encoding="utf-8", errors="replace") as f:
        lines = f.read().splitlines()
    if not lines or not HEADER.match(lines[0]):
        raise ValueError(f"{path}: not a metrale_alloc_report_all report (first line: "
                         f"{lines[0] if lines else '<empty>'!r})")
    for line in lines[1:]:
        m = DEVICE.match(line)
        if m:
            device = f"{m.group(1)} device {m.group(2)}"
            devices.append((device, int(m.group(3)), int(m.group(4))))
            continue
        m = SITE.match(line)
        if m and device is not None:
            b, c = sites.get(m.group(3), (0, 0))
            sites[m.group(3)] = (b + int(m.group(1)), c + int(m.group(2)))
    return devices, sites


def main(argv):
    as_json = "--json" in argv
    paths = [a for a in argv if a != "--json"]
    if not paths:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    ranks, by_site = [], {}
    for path in paths:
        rank = os.path.basename(path)
        rank = rank[:-4] if rank.endswith(".txt") else rank
        try:
            devices, sites = parse(path)
        except (OSError, ValueError) as e:
            print(f"merge-ledger-reports: {e}", file=sys.stderr)
            return 1
        ranks.append((rank, devices))
        for site, (b, c) in sites.items():
            s = by_site.setdefault(site, {"bytes": 0, "count": 0, "ranks": 0, "max": (0, "")})
            s["bytes"] += b
            s["count"] += c
            s["ranks"] += 1
            if b > s["max"][0]:
                s["max"] = (b, rank)
    total = sum(b for _, devs in ranks for _, b, _ in devs)
    count = sum(c for _, devs in ranks for _, _, c in devs)
    order = sorted(by_site.items(), key=lambda kv: (-kv[1]["bytes"], kv[0]))
    if as_json:
        json.dump({"ranks": len(ranks), "bytes": total, "allocations": count,
                   "sites": [{"site": k, "bytes": v["bytes"], "allocations": v["count"],
                              "ranks": v["ranks"], "largest_rank": v["max"][1],
                              "largest_bytes": v["max"][0]} for k, v in order],
                   "devices": [{"rank": r, "device": d, "bytes": b, "allocations": c}
                               for r, devs in ranks for d, b, c in devs]},
                  sys.stdout, indent=1)
        print()
        return 0
    print(f"merged ledger reports: {len(ranks)} rank(s), {human(total)} ({total} bytes) "
          f"in {count} allocation(s)")
    print("by site, all ranks:")
    for site, v in order:
        print(f"  {human(v['bytes'])} ({v['bytes']} bytes) in {v['count']} allocation(s) at "
              f"{site}: {v['ranks']} rank(s), largest {human(v['max'][0])} on {v['max'][1]}")
    print("by rank and device:")
    for rank, devs in ranks:
        for d, b, c in devs:
            print(f"  {rank} {d}: {human(b)} ({b} bytes) in {c} allocation(s)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
