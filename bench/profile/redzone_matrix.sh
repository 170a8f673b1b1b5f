#!/usr/bin/env bash
# The red-zone pair cost against the check's batch bounds and the reuse mode
# (bench/profile/redzone_pairs.c), on the cuda backend: which default of
# METRALE_REDZONE_VERIFY_BATCH / _BYTES and METRALE_REDZONE_REUSE pays.
#   bash bench/profile/redzone_matrix.sh BUILD_DIR [backend: 1 cuda, 2 host]
# One line per setting; the "fast mean" is a pair's own bookkeeping, "slow
# ... ns/pair of total" the batch checks' share (see redzone_pairs.c).
set -euo pipefail
cd "$(dirname "$0")/../.."
build=$1
backend=${2:-1}
bin=${TMPDIR:-/tmp}/redzone_pairs
cc -O2 -Iinclude bench/profile/redzone_pairs.c -L"$build" -lmetrale_gpu \
  -Wl,-rpath,"$PWD/$build" -o "$bin"
run() {  # label env... -- args
  local label=$1
  shift
  local envs=()
  while [ "$1" != "--" ]; do envs+=("$1"); shift; done
  shift
  echo "== $label"
  env "${envs[@]}" "$bin" "$@" "$backend" | tail -2
}
run "pool, no red zone" X=1 -- 0 256
for batch in 256 1024 4096; do
  run "256 B, batch $batch" METRALE_REDZONE_VERIFY_BATCH=$batch -- 64 256
done
for batch in 256 4096; do
  run "256 B, reuse 8, batch $batch" METRALE_REDZONE_REUSE=8 METRALE_REDZONE_VERIFY_BATCH=$batch -- 64 256
done
run "64 MiB pool, no red zone" X=1 -- 0 67108864
for bytes in 1073741824 4294967296; do
  run "64 MiB, verify bytes $bytes" METRALE_REDZONE_VERIFY_BYTES=$bytes -- 64 67108864
  run "64 MiB, reuse 8, verify bytes $bytes" METRALE_REDZONE_REUSE=8 METRALE_REDZONE_VERIFY_BYTES=$bytes -- 64 67108864
done
