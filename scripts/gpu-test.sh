#!/usr/bin/env bash
# Runs the whole test suite on the cuda backend, on a Linux machine with an
# NVIDIA driver and a GPU:
#   bash scripts/gpu-test.sh [BUILD_DIR]        (default build-gpu)
# Configures BUILD_DIR with -Dkernels=enabled (nvcc is required: the test
# kernels and the red-zone kernels are device code), builds, runs `meson test`
# with METRALE_TEST_BACKEND=cuda and prints the summary line
# `N passed, N failed, N skipped`. Exits non-zero on any failure or when
# nothing ran. With $OUT set, meson-logs/testlog.txt and testlog.json are
# copied there.
#
# Dependencies (cmocka, spdlog, fmt) come from the environment as it is:
# PKG_CONFIG_LIBDIR, PKG_CONFIG_PATH, PKG_CONFIG_SYSROOT_DIR and
# LD_LIBRARY_PATH are used untouched when set. On a machine without those
# packages, first run `eval "$(bash .gpu-deps/unpack-deps.sh)"`; this script
# does it by itself when .gpu-deps/ is there, PKG_CONFIG_LIBDIR is unset and
# pkg-config cannot find cmocka.
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-gpu}

if ! { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; } &&
   ! ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 >/dev/null 2>&1; then
  echo "gpu-test: no NVIDIA driver here (libcuda.so.1 not found); use scripts/test.sh" >&2
  exit 2
fi
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi --query-gpu=index,name,driver_version,memory.total --format=csv,noheader || true
fi

if [ -z "${PKG_CONFIG_LIBDIR:-}" ] && [ -f .gpu-deps/unpack-deps.sh ] &&
   ! pkg-config --exists cmocka 2>/dev/null; then
  echo "gpu-test: cmocka not found by pkg-config; unpacking .gpu-deps" >&2
  eval "$(bash .gpu-deps/unpack-deps.sh)" || exit 1
fi

if [ -f "$build/build.ninja" ]; then
  meson configure "$build" -Dkernels=enabled -Dtests=true || exit 1
else
  meson setup "$build" -Dkernels=enabled -Dtests=true || exit 1
fi
ninja -C "$build" || exit 1

rm -f "$build/meson-logs/testlog.json" "$build/meson-logs/testlog.txt"
# Suites share the one GPU; a few at a time keeps a runaway test from
# starving the others of device memory.
METRALE_TEST_BACKEND=cuda meson test -C "$build" --print-errorlogs \
  --num-processes "${GPU_TEST_JOBS:-4}"
test_rc=$?

if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp -f "$build/meson-logs/testlog.txt" "$build/meson-logs/testlog.json" "$OUT/" 2>/dev/null || true
fi

if [ ! -f "$build/meson-logs/testlog.json" ]; then
  echo "0 passed, 0 failed, 0 skipped"
  exit 1
fi
python3 scripts/summarize-tests.py "$build/meson-logs/testlog.json"
summary_rc=$?
if [ "$summary_rc" -ne 0 ] || [ "$test_rc" -ne 0 ]; then exit 1; fi
exit 0
