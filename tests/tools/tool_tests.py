#!/usr/bin/env python3
"""The event-log tools end to end: a real log written through the library
(event_log_gen), replayed by metrale-replay and drawn by metrale-timeline in
headless Chromium.

Usage: tool_tests.py replay_clean|replay_diverges|timeline BUILD_TOOLS...
  replay_clean    GEN REPLAY WORKDIR
  replay_diverges GEN REPLAY WORKDIR DIVERGES_JSONL
  timeline        GEN TIMELINE_SCRIPT WORKDIR
Exit 0 pass, 1 fail, 77 skip (timeline only: no chromium, with the reason).
"""
import json
import os
import re
import shutil
import subprocess
import sys

SKIP = 77


def fail(msg):
    print("FAIL:", msg)
    sys.exit(1)


def run(cmd, want=None, env=None, quiet=False):
    print("$", " ".join(cmd))
    p = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=120)
    if not quiet:
        sys.stdout.write(p.stdout)
    sys.stdout.write(p.stderr)
    if want is not None and p.returncode != want:
        fail(f"{cmd[0]} exited {p.returncode}, wanted {want}")
    return p


def generate(gen, workdir, name):
    os.makedirs(workdir, exist_ok=True)
    log = os.path.join(workdir, name)
    env = dict(os.environ)
    env.pop("METRALE_EVENT_LOG", None)
    run([gen, log], want=0, env=env)
    lines = [json.loads(l) for l in open(log, encoding="utf-8") if l.strip()]
    kinds = [l["ev"] for l in lines]
    if kinds.count("alloc") != 4 + 20 * 10 or kinds.count("free") != 4 + 20 * 10 \
            or kinds.count("oom") != 1 or kinds.count("scan") != 1 \
            or kinds[0] != "open" or kinds[-1] != "close":
        fail(f"unexpected events in {log}: { {k: kinds.count(k) for k in set(kinds)} }")
    return log, lines


def replay_json(replay, args, want):
    p = run([replay, "--json"] + args, want=want)
    rows = [json.loads(l) for l in p.stdout.splitlines() if l.startswith("{")]
    if len(rows) != 1:
        fail(f"wanted one context in the replay's output, got {len(rows)}")
    return rows[0]


def replay_clean(gen, replay, workdir):
    log, _ = generate(gen, workdir, "clean.jsonl")
    for pool in ("on", "off"):
        r = replay_json(replay, ["--backend", "host", "--pool", pool, log], 0)
        if r["divergences"] != 0 or r["replay_failures"] != 0:
            fail(f"pool {pool}: the replay diverged: {r['messages']}")
        if r["allocs"] != 204 or r["frees"] != 204 or r["ooms_logged"] != 1 or r["scans"] != 1:
            fail(f"pool {pool}: counts {r}")
        if r["pool"] != (pool == "on"):
            fail(f"--pool {pool} replayed with pool {r['pool']}")
        if r["peak_live_bytes"] != r["log_peak_live_bytes"] or r["peak_live_bytes"] != 5701632:
            fail(f"pool {pool}: peak live {r['peak_live_bytes']}, logged "
                 f"{r['log_peak_live_bytes']}, wanted 5701632")
        if pool == "on" and r["peak_reserved_bytes"] < r["peak_live_bytes"]:
            fail(f"pool reserved peak {r['peak_reserved_bytes']} below the live peak")
    p = run([replay, log], want=0)
    if "replay: clean" not in p.stdout:
        fail("the text report does not say clean")


def replay_diverges(gen, replay, workdir, diverges):
    log, _ = generate(gen, workdir, "limited.jsonl")
    # Under a 2 MiB budget the weights (4 x 1 MiB) cannot all be held.
    r = replay_json(replay, ["--backend", "host", "--limit", str(2 << 20), log], 1)
    if r["divergences"] < 2 or not any("model/encoder.py:10" in m and "succeeded in the log"
                                      in m for m in r["messages"]):
        fail(f"--limit: wanted the weights' allocations to diverge: {r}")
    # A logged out-of-memory that now succeeds, and a logged 4 EiB success
    # that cannot: two divergences, both named.
    r = replay_json(replay, ["--backend", "host", diverges], 1)
    if r["divergences"] != 2:
        fail(f"wanted 2 divergences: {r}")
    msgs = " | ".join(r["messages"])
    for want in ("train.py:20", "failed (out of memory) in the log, succeeded in the replay",
                 "train.py:31", "succeeded in the log, failed in the replay"):
        if want not in msgs:
            fail(f"the report does not say {want!r}: {msgs}")
    p = run([replay, diverges], want=1)
    if "replay: DIVERGED" not in p.stdout:
        fail("the text report does not say DIVERGED")
    # Bad input: a malformed line is exit 2 naming the line.
    bad = os.path.join(workdir, "bad.jsonl")
    with open(bad, "w") as f:
        f.write(open(diverges).readline())
        f.write('{"ev":"alloc","seq":1,"t_ns":5,"ctx":"0x1","stream":"0x0","bytes":-4}\n')
    p = run([replay, bad], want=2)
    if "bad.jsonl:2" not in p.stderr:
        fail("a malformed line is not named by its number")
    run([replay, os.path.join(workdir, "missing.jsonl")], want=2)
    run([replay, "--pool", "maybe", log], want=2)


def find_chromium():
    for name in ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable"):
        path = shutil.which(name)
        if path:
            return path
    return None


def timeline(gen, script, workdir):
    log, lines = generate(gen, workdir, "timeline.jsonl")
    page = os.path.join(workdir, "timeline.html")
    run([sys.executable, script, log, "-o", page, "--title", "event_log_gen timeline"], want=0)
    text = open(page, encoding="utf-8").read()
    for bad in ("http://", "https://", "<link", "src="):
        if bad in text.replace('"http://www.w3.org/2000/svg"', ""):
            fail(f"the page refers to something outside itself ({bad!r})")
    chromium = find_chromium()
    if chromium is None:
        print("SKIP: chromium is not installed (scripts/install-deps.sh installs Debian's "
              "chromium package; this machine has none, so the page was built but not drawn)")
        sys.exit(SKIP)
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--hide-scrollbars", f"--user-data-dir={workdir}/chromium-profile"]
    url = "file://" + os.path.abspath(page)
    dom = run([chromium] + flags + ["--virtual-time-budget=5000", "--dump-dom", url], want=0,
               quiet=True).stdout
    if 'data-rendered="1"' not in dom:
        fail("the page's script did not finish drawing (no data-rendered on <body>)")
    sites = {"model/encoder.py:10", "model/attention.py:42", "data/loader.py:7", "model/stream.py:3"}
    drawn = set(re.findall(r'<path[^>]*class="area"[^>]*data-series="([^"]*)"', dom))
    legend = set(re.findall(r'<li class="series" data-series="([^"]*)"', dom))
    if drawn != sites or legend != sites:
        fail(f"series drawn {sorted(drawn)}, legend {sorted(legend)}, wanted {sorted(sites)}")
    # The peak the page marks, and each series' highest point as drawn, are
    # the log's: live bytes summed independently here.
    live, peak, owner = 0, 0, {}
    site_live, site_peak = {}, {}
    for l in sorted(lines, key=lambda l: l["seq"]):
        if l["ev"] == "alloc":
            owner[l["ptr"]] = (l["bytes"], l["site"])
            live += l["bytes"]
            peak = max(peak, live)
            site_live[l["site"]] = site_live.get(l["site"], 0) + l["bytes"]
            site_peak[l["site"]] = max(site_peak.get(l["site"], 0), site_live[l["site"]])
        elif l["ev"] == "free" and l["ptr"] in owner:
            b, site = owner.pop(l["ptr"])
            live -= b
            site_live[site] -= b
    drawn_max = dict(re.findall(r'<path[^>]*data-series="([^"]*)"[^>]*data-max="(\d+)"', dom))
    if {k: int(v) for k, v in drawn_max.items()} != site_peak:
        fail(f"series drawn with highest points {drawn_max}, the log's are {site_peak}")
    m = re.search(r'<div id="peak" data-bytes="(\d+)"', dom)
    if not m or int(m.group(1)) != peak:
        fail(f"the page's peak {m.group(1) if m else None} is not the log's {peak}")
    if 'id="peak-line"' not in dom or "mark-oom" not in dom or "mark-scan" not in dom:
        fail("the peak line, the out-of-memory mark or the scan mark is missing")
    shot = os.path.join(workdir, "timeline.png")
    if os.path.exists(shot):
        os.remove(shot)
    # The tool's own --screenshot (headless Chromium, as above).
    run([sys.executable, script, log, "-o", page, "--title", "event_log_gen timeline",
         "--screenshot", shot], want=0)
    if not os.path.exists(shot) or os.path.getsize(shot) < 5000:
        fail(f"no screenshot at {shot}")
    print(f"screenshot: {shot} ({os.path.getsize(shot)} bytes)")


def main():
    if len(sys.argv) < 2:
        fail(__doc__)
    mode, args = sys.argv[1], sys.argv[2:]
    {"replay_clean": replay_clean, "replay_diverges": replay_diverges,
     "timeline": timeline}[mode](*args)
    print("PASS")


if __name__ == "__main__":
    main()
