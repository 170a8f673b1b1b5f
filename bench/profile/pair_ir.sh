#!/usr/bin/env bash
# Ir per pooled alloc+free pair (see pair_ir.c) under callgrind.
#   bash bench/profile/pair_ir.sh [BUILD_DIR] [live] [bytes] [variant]   (default build)
# variant: pool (default: what the environment says), redzone (64-byte red
# zones, as bench_pool's library_pool_redzone rows) or reuse8 (the same with
# METRALE_REDZONE_REUSE=8: library_pool_redzone_reuse8). The live blocks get
# pads too with red zones on, as in the bench.
# Prints "Ir/pair N" and leaves callgrind.out in $TMPDIR/pair_ir for
# callgrind_annotate.
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build}
live=${2:-1000}
bytes=${3:-1048576}
case ${4:-pool} in
  pool) ;;
  redzone) export METRALE_REDZONE=64 ;;
  reuse8) export METRALE_REDZONE=64 METRALE_REDZONE_REUSE=8 ;;
  *) echo "pair_ir.sh: variant is pool, redzone or reuse8" >&2; exit 2 ;;
esac
dir=${TMPDIR:-/tmp}/pair_ir
mkdir -p "$dir"
cc -O2 -Iinclude bench/profile/pair_ir.c -o "$dir/pair_ir" -L"$build" -lmetrale_gpu \
  -Wl,-rpath,"$PWD/$build"
pairs=20000
# The first run's toggle also counts the warm-up's 1000 pairs: subtract two
# runs so that only the extra pairs remain.
ir() {
  valgrind --tool=callgrind --toggle-collect=run_pairs --callgrind-out-file="$dir/callgrind.out.$1" \
    "$dir/pair_ir" "$1" "$live" "$bytes" >/dev/null 2>"$dir/vg.$1.log"
  grep -m1 '^summary:\|^totals:' "$dir/callgrind.out.$1" | awk '{print $2}'
}
a=$(ir 1000)
b=$(ir $((pairs + 1000)))
echo "Ir/pair $(( (b - a) / pairs ))  (live $live, bytes $bytes, ${4:-pool})"
cp "$dir/callgrind.out.$((pairs + 1000))" "$dir/callgrind.out"
