#!/usr/bin/env bash
# The whole GPU check of a change, in one device call (scripts/gpu-test.sh is
# its first step): on a machine with an NVIDIA driver and a GPU, from the
# repo root,
#   bash scripts/gpu-validate.sh [BUILD_DIR]          (default build-gpu)
# 1. configures BUILD_DIR with the kernels (GPU_ARCHS, default 90) and builds;
# 2. the whole suite on the cuda backend, pool on (scripts/gpu-test.sh);
# 3. the same with METRALE_POOL=0;
# 4. the Rust and Go binaries scripts/gpu-bindings-prep.sh left in
#    .gpu-carry/bindings (skipped when absent);
# 5. examples/python/planted_bug.py (skipped without torch);
# 6. the stream-order mutants of scripts/mutations-gpu.txt on the cuda
#    backend (GPU_VALIDATE_MUTANTS=0 skips them).
# Each step's output goes to $OUT (default ./gpu-validate-out) as soon as it
# ends, with a line per step in $OUT/steps.txt, so a run cut short by a time
# limit still returns what it finished. Dependencies come from .gpu-deps as
# in scripts/gpu-test.sh. Exits non-zero when any step failed.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}
out=${OUT:-gpu-validate-out}
mkdir -p "$out"
start=$SECONDS
failed=0
step() {  # step NAME RC SUMMARY
  printf '%-9s rc=%s at %4ss: %s\n' "$1" "$2" "$((SECONDS - start))" "$3" | tee -a "$out/steps.txt"
  [ "$2" = 0 ] || failed=1
}
if [ -z "${PKG_CONFIG_LIBDIR:-}" ] && [ -f .gpu-deps/unpack-deps.sh ] &&
   ! pkg-config --exists cmocka 2>/dev/null; then
  eval "$(bash .gpu-deps/unpack-deps.sh)" || exit 1
fi
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" -Dkernels=enabled -Dtests=true -Dgpu_archs="${GPU_ARCHS:-90}" \
    >"$out/setup.txt" 2>&1 || { tail -n 20 "$out/setup.txt"; exit 1; }
fi
ninja -C "$build" >"$out/build.txt" 2>&1
rc=$?; step build "$rc" "$(tail -n 1 "$out/build.txt")"
[ "$rc" = 0 ] || exit 1

OUT= bash scripts/gpu-test.sh "$build" >"$out/pool_on.txt" 2>&1
rc=$?; cp "$build/meson-logs/testlog.txt" "$out/testlog_pool_on.txt" 2>/dev/null
step pool_on "$rc" "$(tail -n 1 "$out/pool_on.txt")"

# As many suites at once as step 2 (gpu-test.sh): one per CPU (16) on one
# GPU made the context-heavy suites wait on each other past their limit.
METRALE_POOL=0 METRALE_TEST_BACKEND=cuda meson test -C "$build" --no-rebuild \
  --num-processes "${GPU_TEST_JOBS:-4}" >"$out/pool_off.txt" 2>&1
rc=$?; cp "$build/meson-logs/testlog.txt" "$out/testlog_pool_off.txt" 2>/dev/null
step pool_off "$rc" "$(grep -E '^(Ok|Fail|Skipped):' "$out/pool_off.txt" | tr -s ' \n' ' ')"

if [ -f .gpu-carry/bindings/MANIFEST ]; then
  bash scripts/gpu-bindings-run.sh "$build" >"$out/bindings.txt" 2>&1
  rc=$?; step bindings "$rc" "$(tail -n 1 "$out/bindings.txt")"
else
  step bindings 0 "skipped: no .gpu-carry/bindings (run scripts/gpu-bindings-prep.sh where cargo and go are)"
fi

if python3 -c 'import torch' 2>/dev/null; then
  METRALE_BUILD_DIR=$PWD/$build timeout 300 python3 examples/python/planted_bug.py >"$out/planted.txt" 2>&1
  rc=$?; step planted "$rc" "$(tail -n 1 "$out/planted.txt")"
else
  step planted 0 "skipped: python3 has no torch"
fi

if [ "${GPU_VALIDATE_MUTANTS:-1}" != 0 ]; then
  MUTATE_BACKEND=cuda MUTATE_MESON_ARGS="-Dgpu_archs=${GPU_ARCHS:-90}" \
    bash scripts/mutate.sh --all --list scripts/mutations-gpu.txt >"$out/mutants.txt" 2>&1
  rc=$?; step mutants "$rc" "$(tail -n 1 "$out/mutants.txt")"
fi
exit "$failed"
