#!/usr/bin/env bash
# A new user's first program, outside this tree, written as the top README's
# "Using it from Rust and Go" says: a crate with path dependencies on both
# crates and the README's build.rs, or a module with the README's go.mod
# `replace` line and a cgo preamble with a host kernel. Prints the program
# it built; bindings/test.sh then checks it and runs it (first_run).
#
# Usage: bindings/new_user.sh rust|go DIR
#   DIR: where the project is written (emptied first).
# bindings/test.sh calls it with its environment (PKG_CONFIG_PATH,
# CARGO_TARGET_DIR, GOCACHE, GOFLAGS, METRALE_GPU_LINK).
set -euo pipefail
lang=$1 dir=$2
here=$(cd "$(dirname "$0")" && pwd)
rm -rf "$dir"
mkdir -p "$dir"
cd "$dir"

case $lang in
rust)
  cat >Cargo.toml <<EOF
[package]
name = "first-run"
version = "0.1.0"
edition = "2021"

[workspace]

[dependencies]
metrale-gpu = { path = "$here/rust/metrale-gpu" }
metrale-gpu-sys = { path = "$here/rust/metrale-gpu-sys" }
EOF
  # The README's build.rs, as it is there.
  cat >build.rs <<'EOF'
fn main() {
    println!("cargo:rerun-if-env-changed=DEP_METRALE_GPU_LINK");
    if std::env::var("DEP_METRALE_GPU_LINK").as_deref() == Ok("dynamic") {
        let dir = std::env::var("DEP_METRALE_GPU_LIBDIR").unwrap();
        println!("cargo:rustc-link-arg=-Wl,-rpath,{dir}");
    }
}
EOF
  mkdir src
  cat >src/main.rs <<'EOF'
fn main() -> Result<(), metrale_gpu::Error> {
    let ctx = metrale_gpu::Context::new()?;
    let buf = ctx.alloc::<u32>(256)?;
    println!("first-run (rust): {} live bytes", ctx.live_bytes()?);
    drop(buf);
    Ok(())
}
EOF
  cargo build --offline --quiet >&2
  echo "$CARGO_TARGET_DIR/debug/first-run"
  ;;
go)
  cat >go.mod <<EOF
module example.com/firstrun

go 1.19

require metrale.dev/metrale v0.0.0

replace metrale.dev/metrale => $here/go
EOF
  # The README's preamble; with -tags metrale_shared, the shared package.
  pc=metrale_gpu_static tags=()
  [ "${METRALE_GPU_LINK:-static}" = dynamic ] && pc=metrale_gpu tags=(-tags metrale_shared)
  cat >host_kernels.go <<EOF
package main

/*
#cgo pkg-config: $pc
#include <metrale_gpu.h>

static metrale_status_t scale_host(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  float* p = *(float* const*)call->params[0];
  float k = *(const float*)call->params[1];
  uint64_t n = *(const uint64_t*)call->params[2];
  for (uint64_t i = 0; i < n; i++) p[i] *= k;
  return METRALE_OK;
}
static void* scale_host_ptr(void) { return (void*)scale_host; }
*/
import "C"

import "metrale.dev/metrale"

// registerKernels registers this file's C host kernels (C names are per file).
func registerKernels(ctx *metrale.Context) error {
	return ctx.RegisterHostKernel("my_module", "scale", C.scale_host_ptr(), []uint64{8, 4, 8})
}
EOF
  cat >main.go <<'EOF'
package main

import (
	"fmt"
	"os"

	"metrale.dev/metrale"
)

func main() {
	ctx, err := metrale.NewContext(nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer ctx.Close()
	if err := registerKernels(ctx); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	buf, err := ctx.Alloc(4096)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	defer buf.Close()
	live, err := ctx.LiveBytes()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Printf("first-run (go): %d live bytes\n", live)
}
EOF
  go build "${tags[@]}" -o first-run . >&2
  echo "$dir/first-run"
  ;;
*)
  echo "usage: $0 rust|go DIR" >&2
  exit 2
  ;;
esac
