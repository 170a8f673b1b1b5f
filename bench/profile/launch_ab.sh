#!/usr/bin/env bash
# Launch A/B on a GPU: bench_launch of two builds run alternately, RUNS times
# each, in one process per run, so that the drift of the driver's own launch
# time between runs (±40 ns on an H100 host, r20) falls on both alike.
#   bash bench/profile/launch_ab.sh A_BUILD B_BUILD [RUNS] [OUT_DIR]
# Each build must have bench/bench_launch (meson -Dkernels=enabled). Prints,
# per run, library − raw (ns) for the empty launch and the 3-parameter
# launches (void** and packed), then the median over runs of each build. The
# JSON of every run is left in OUT_DIR (default $TMPDIR/launch_ab).
set -uo pipefail
a=${1:?usage: launch_ab.sh A_BUILD B_BUILD [RUNS] [OUT_DIR]}
b=${2:?usage: launch_ab.sh A_BUILD B_BUILD [RUNS] [OUT_DIR]}
runs=${3:-4}
out=${4:-${TMPDIR:-/tmp}/launch_ab}
mkdir -p "$out"
for ((i = 1; i <= runs; ++i)); do
  for side in a b; do
    dir=$a; [ "$side" = b ] && dir=$b
    "$dir/bench/bench_launch" "$out/$side-$i.json" >/dev/null 2>"$out/$side-$i.err" ||
      echo "launch_ab: run $side-$i failed (see $out/$side-$i.err)" >&2
  done
done
python3 - "$out" "$runs" <<'PY'
import json, statistics, sys
out, runs = sys.argv[1], int(sys.argv[2])
pairs = [("launch_empty/library", "launch_empty/raw"),
         ("launch_3params/library_params", "launch_3params/raw_params"),
         ("launch_3params/library_packed", "launch_3params/raw_packed")]
gaps = {"a": [], "b": []}
print("| run | " + " | ".join(l.split("/", 1)[1] + " − raw" for l, _ in pairs) + " | raw empty |")
print("|" + " --- |" * (len(pairs) + 2))
for i in range(1, runs + 1):
    for side in "ab":
        try:
            rows = {r["id"]: r["median"] for r in json.load(open(f"{out}/{side}-{i}.json"))["results"]}
            g = [rows[l] - rows[r] for l, r in pairs]
        except (OSError, KeyError, ValueError):
            print(f"| {side}{i} | (no result) |")
            continue
        gaps[side].append(g)
        print(f"| {side}{i} | " + " | ".join(f"{x:+.0f}" for x in g) + f" | {rows[pairs[0][1]]:.0f} |")
for side in "ab":
    if gaps[side]:
        med = [statistics.median(col) for col in zip(*gaps[side])]
        print(f"| median {side} | " + " | ".join(f"{x:+.0f}" for x in med) + " | |")
PY
