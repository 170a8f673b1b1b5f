#!/usr/bin/env bash
# Builds and tests the Rust and Go bindings against a Meson build directory,
# then runs both tours and a new user's program of each (bindings/new_user.sh)
# as a first run. Usage: bindings/test.sh <meson-build-dir> [rust|go|all]
# METRALE_GPU_LINK=static (the default: libmetrale_gpu.a) or dynamic. The
# dynamic run skips the steps linking cannot change (Go's -race run, Rust's
# compile_fail codes), which the static run makes; BINDINGS_ALL_STEPS=1 runs
# them there too.
# Exits 77 (Meson's "skipped") when the chosen toolchain is not installed.
# Everything the toolchains write (cargo target, Go cache) stays in the build
# directory. Exits non-zero on any failure.
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ] || [ ! -d "$1" ]; then
  echo "usage: $0 <meson-build-dir> [rust|go|all]" >&2
  exit 2
fi
which=${2:-all}
case $which in
  rust) command -v cargo >/dev/null || { echo "skipped: cargo is not installed"; exit 77; } ;;
  go) command -v go >/dev/null || { echo "skipped: go is not installed"; exit 77; } ;;
  all) ;;
  *) echo "usage: $0 <meson-build-dir> [rust|go|all]" >&2; exit 2 ;;
esac
build=$(cd "$1" && pwd)
here=$(cd "$(dirname "$0")" && pwd)

export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! pkg-config --exists metrale_gpu; then
  echo "bindings/test.sh: no metrale_gpu.pc under $build/meson-uninstalled (run meson setup/ninja first)" >&2
  exit 1
fi
libdir=$(pkg-config --libs-only-L metrale_gpu | sed 's/^ *-L//; s/ .*//')
# Both bindings link libmetrale_gpu.a by default, so nothing here sets
# LD_LIBRARY_PATH: the tests and tours run as a user's first run would.
# METRALE_GPU_LINK=dynamic tests the shared library instead (the sys crate's
# choice; Go builds with -tags metrale_shared and, having no rpath, gets
# LD_LIBRARY_PATH).
link=${METRALE_GPU_LINK:-static}
case $link in
  static)
    if [ ! -f "$libdir/libmetrale_gpu.a" ]; then
      echo "bindings/test.sh: no libmetrale_gpu.a in $libdir: the build was configured with" \
        "default_library=shared (meson configure $1 -Ddefault_library=both), or set METRALE_GPU_LINK=dynamic" >&2
      exit 1
    fi
    go_tags=() cargo_suffix= ;;
  dynamic)
    export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    go_tags=(-tags metrale_shared) cargo_suffix=-dynamic ;;
  *) echo "bindings/test.sh: METRALE_GPU_LINK=$link: expected static or dynamic" >&2; exit 2 ;;
esac
export METRALE_GPU_LINK="$link"
# The tests run on the host backend unless the caller chose one.
export METRALE_BACKEND="${METRALE_BACKEND:-host}"

# The dynamic build has a target dir of its own (scripts/gpu-bindings-prep.sh
# shares it), so switching modes rebuilds nothing.
export CARGO_TARGET_DIR="$build/bindings-cargo$cargo_suffix"
export GOCACHE="$build/bindings-go/cache" GOPATH="$build/bindings-go/path"
export GOPROXY=off GOFLAGS=-mod=mod GOTOOLCHAIN=local GO111MODULE=on

failed=()
step() {
  local name=$1
  shift
  echo "=== bindings: $name"
  if "$@"; then
    echo "=== bindings: $name: ok"
  else
    echo "=== bindings: $name: FAILED" >&2
    failed+=("$name")
  fi
}

# first_run BINARY: checks that BINARY does (dynamic) or does not (static)
# need libmetrale_gpu.so, that a static one carries no rpath that could
# hide a missing library, then runs it with LD_LIBRARY_PATH unset (static)
# or as set above (dynamic).
first_run() {
  local dyn
  dyn=$(readelf -d "$1") || return 1
  if [ "$link" = static ]; then
    if grep -E 'libmetrale_gpu|\((RPATH|RUNPATH)\)' <<<"$dyn"; then
      echo "$1: linked statically, yet it needs libmetrale_gpu.so or carries an rpath (above)" >&2
      return 1
    fi
    env -u LD_LIBRARY_PATH "$1"
  else
    grep -q 'Shared library: \[libmetrale_gpu.so.0\]' <<<"$dyn" ||
      { echo "$1: METRALE_GPU_LINK=dynamic, yet it does not link libmetrale_gpu.so.0" >&2; return 1; }
    "$1"
  fi
}
export -f first_run
export link

if [ "$which" != go ]; then
  step "rust: cargo test" bash -c "cd '$here/rust' && cargo test --offline"
  # The compile_fail doc tests (src/soundness.rs) name the error each must
  # fail with; rustdoc checks those codes only on a nightly toolchain, which
  # RUSTC_BOOTSTRAP=1 makes this one act as (for rustdoc's check alone: the
  # crates use no unstable feature). A snippet that fails for another reason
  # (a typo, a renamed method) then fails here.
  # Compile-only: the link choice changes nothing there, so the static run's is enough.
  if [ "$link" != dynamic ] || [ "${BINDINGS_ALL_STEPS:-0}" = 1 ]; then
    step "rust: compile_fail error codes" bash -c "cd '$here/rust' && RUSTC_BOOTSTRAP=1 cargo test --offline --doc -p metrale-gpu"
  fi
  step "rust: tour ($link)" bash -c "cd '$here/rust' && cargo build --offline --quiet --example tour"
  step "rust: tour's first run" first_run "$CARGO_TARGET_DIR/debug/examples/tour"
  step "rust: a new crate's first run (top README)" \
    bash -c 'first_run "$(bash "$0/new_user.sh" rust "$1")"' "$here" "$build/bindings-new-user/rust-$link"
fi
if [ "$which" != rust ]; then
  step "go: vet" bash -c "cd '$here/go' && go vet ${go_tags[*]} ./..."
  step "go: test" bash -c "cd '$here/go' && go test ${go_tags[*]} -count=1 ./..."
  # The race detector needs cgo and a C compiler, both already required.
  # Once per machine: how the library is linked changes no Go-side race.
  if [ "$link" != dynamic ] || [ "${BINDINGS_ALL_STEPS:-0}" = 1 ]; then
    step "go: test -race" bash -c "cd '$here/go' && go test ${go_tags[*]} -race -count=1 ./..."
  fi
  step "go: tour ($link)" bash -c "cd '$here/go' && go build ${go_tags[*]} -o '$build/bindings-go/tour-$link' ./examples/tour"
  # The tour's red-zone line names its site relative to the module root.
  step "go: tour's first run" bash -c 'set -o pipefail; cd "$1" && first_run "$0" | tee /dev/stderr | grep " from examples/tour/main.go:[0-9]" >/dev/null' \
    "$build/bindings-go/tour-$link" "$here/go"
  step "go: a new module's first run (top README)" \
    bash -c 'first_run "$(bash "$0/new_user.sh" go "$1")"' "$here" "$build/bindings-new-user/go-$link"
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "bindings: ${#failed[@]} step(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "bindings: all steps passed"
