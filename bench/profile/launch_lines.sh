#!/usr/bin/env bash
# Data cache lines per metrale_launch from outside L1 (launch_lines.c) under
# callgrind's cache simulation, each attributed to its source line, the host
# backend's own left out (the cuda backend's differ): each line is one the
# launch waits for after the driver's launch evicted ours. Stack lines show
# too; on a GPU the driver's deeper stack keeps ours warm.
#   bash bench/profile/launch_lines.sh [BUILD_DIR]   (default build)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
dir=${TMPDIR:-/tmp}/launch_lines
mkdir -p "$dir"
cc -O2 -Iinclude bench/profile/launch_lines.c -o "$dir/launch_lines" -L"$build" -lmetrale_gpu \
  -Wl,-rpath,"$PWD/$build"
n=2000
valgrind --tool=callgrind --cache-sim=yes --dump-instr=yes --toggle-collect=one_launch \
  --callgrind-out-file="$dir/callgrind.out" "$dir/launch_lines" "$n" 2>"$dir/vg.log" >/dev/null
python3 bench/profile/cache_lines.py "$dir/callgrind.out" "$n" "$(readlink -f "$build/libmetrale_gpu.so")"
