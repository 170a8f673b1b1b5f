#!/usr/bin/env bash
# Builds and tests the Rust and Go bindings against a Meson build directory,
# then runs both tours. Usage: bindings/test.sh <meson-build-dir> [rust|go|all]
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
export LD_LIBRARY_PATH="$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
# The tests run on the host backend unless the caller chose one.
export METRALE_BACKEND="${METRALE_BACKEND:-host}"

export CARGO_TARGET_DIR="$build/bindings-cargo"
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

if [ "$which" != go ]; then
  step "rust: cargo test" bash -c "cd '$here/rust' && cargo test --offline"
  step "rust: tour" bash -c "cd '$here/rust' && cargo run --offline --quiet --example tour"
fi
if [ "$which" != rust ]; then
  step "go: vet" bash -c "cd '$here/go' && go vet ./..."
  step "go: test" bash -c "cd '$here/go' && go test -count=1 ./..."
  # The race detector needs cgo and a C compiler, both already required.
  step "go: test -race" bash -c "cd '$here/go' && go test -race -count=1 ./..."
  # The tour's red-zone line names its site relative to the module root.
  step "go: tour" bash -c "set -o pipefail; cd '$here/go' && go run ./examples/tour | tee /dev/stderr | grep ' from examples/tour/main.go:[0-9]' >/dev/null"
fi

if [ ${#failed[@]} -ne 0 ]; then
  echo "bindings: ${#failed[@]} step(s) failed: ${failed[*]}" >&2
  exit 1
fi
echo "bindings: all steps passed"
