#!/usr/bin/env bash
# Runs the Rust and Go binding test binaries and tours that
# scripts/gpu-bindings-prep.sh built elsewhere and left in .gpu-carry/bindings/,
# on the GPU machine, which has no cargo, rustc or go (none is needed here).
#
# Usage, from the repo root: scripts/gpu-bindings-run.sh <meson-build-dir>
#   The build dir is this machine's build of the same tree
#   (bash scripts/gpu-test.sh build-gpu makes it); each binary runs with
#     LD_LIBRARY_PATH=<build-dir>        its libmetrale_gpu.so.0
#     METRALE_BACKEND=cuda               the library's and the tests' backend
#     METRALE_TEST_KERNELS=<build-dir>/tests/kernels/test_kernels.fatbin
#   Rust test binaries get --test-threads=4, Go test binaries -test.v.
#   GPU_BINDINGS_BACKEND=host runs them on the host backend instead, to check
#   the carried binaries where there is no GPU; GPU_BINDINGS_TIMEOUT (seconds,
#   default 300) bounds each binary.
#
# Rust doc tests are not here: rustdoc compiles them when they run, so they
# cannot be built ahead into a binary; bindings/test.sh runs them where cargo is.
#
# Prints each binary's output and result, then a last line
# "N passed, N failed" counting binaries; exits non-zero on any failure or
# when nothing ran.
set -uo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 <meson-build-dir>" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
carry="$root/.gpu-carry/bindings"
manifest="$carry/MANIFEST"
backend=${GPU_BINDINGS_BACKEND:-cuda}
limit=${GPU_BINDINGS_TIMEOUT:-300}
kernels="$build/tests/kernels/test_kernels.fatbin"

case $backend in
  cuda | host) ;;
  *) echo "gpu-bindings-run: GPU_BINDINGS_BACKEND=$backend: expected cuda or host" >&2; exit 2 ;;
esac
if [ ! -s "$manifest" ]; then
  echo "gpu-bindings-run: no $manifest (run scripts/gpu-bindings-prep.sh where cargo and go are, and bring .gpu-carry/ along)" >&2
  exit 1
fi
if [ ! -e "$build/libmetrale_gpu.so.0" ]; then
  echo "gpu-bindings-run: no libmetrale_gpu.so.0 in $build (build it first)" >&2
  exit 1
fi
if [ "$backend" = cuda ] && [ ! -s "$kernels" ]; then
  echo "gpu-bindings-run: no $kernels (the build found no nvcc?)" >&2
  exit 1
fi

# The library needs spdlog and fmt; on the GPU machine they come from the
# Debian packages brought along in .gpu-deps/, as scripts/gpu-test.sh does.
missing() { LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}" ldd "$build/libmetrale_gpu.so.0" | grep 'not found'; }
if missing >/dev/null && [ -f "$root/.gpu-deps/unpack-deps.sh" ]; then
  echo "gpu-bindings-run: the library's dependencies are not found; unpacking .gpu-deps"
  eval "$(bash "$root/.gpu-deps/unpack-deps.sh")" || exit 1
fi
if missing; then
  echo "gpu-bindings-run: $build/libmetrale_gpu.so.0 needs the libraries above (bring .gpu-deps/ along)" >&2
  exit 1
fi
export LD_LIBRARY_PATH="$build${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
export METRALE_BACKEND="$backend" METRALE_TEST_KERNELS="$kernels"
# header_drift asks pkg-config for the header of the library it runs
# against: this build's. Its .pc files carry absolute paths, which a
# PKG_CONFIG_SYSROOT_DIR (set by .gpu-deps/unpack-deps.sh for spdlog and fmt)
# would prefix, so the sysroot is not passed on.
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
unset PKG_CONFIG_SYSROOT_DIR
echo "gpu-bindings-run: backend $backend, library $(readlink -f "$build/libmetrale_gpu.so.0")"

passed=0
failed=0
failures=()
while IFS=$'\t' read -r kind name dir what; do
  bin="$carry/$name"
  case $kind in
    rust-test) args=(--test-threads=4) ;;
    go-test) args=(-test.v) ;;
    rust-example | go-example) args=() ;;
    *)
      echo "=== $name: FAILED (unknown kind '$kind' in $manifest)"
      failed=$((failed + 1))
      failures+=("$name")
      continue
      ;;
  esac
  echo "=== $name: $what"
  # As cargo and go test would: in the package's folder, with
  # CARGO_MANIFEST_DIR for the Rust tests that read the package's files.
  (cd "$root/$dir" && CARGO_MANIFEST_DIR="$root/$dir" timeout "$limit" "$bin" "${args[@]}") </dev/null 2>&1
  rc=$?
  if [ "$rc" -eq 0 ]; then
    echo "=== $name: ok"
    passed=$((passed + 1))
  else
    [ "$rc" -eq 124 ] && echo "=== $name: timed out after ${limit}s"
    echo "=== $name: FAILED (exit $rc)"
    failed=$((failed + 1))
    failures+=("$name")
  fi
done <"$manifest"

[ "$failed" -eq 0 ] || echo "gpu-bindings-run: failed: ${failures[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ] && [ "$passed" -gt 0 ]
