#!/usr/bin/env bash
# Builds the Rust and Go binding test binaries and tours here, without running
# them, and copies them into .gpu-carry/bindings/ for the GPU machine, which
# has no cargo, rustc or go. scripts/gpu-bindings-run.sh runs them there.
#
# Usage: scripts/gpu-bindings-prep.sh <meson-build-dir>
#   The build dir must be built (ninja) from this tree: its
#   meson-uninstalled/metrale_gpu.pc is what the bindings link against.
#
# .gpu-carry/bindings/MANIFEST has one line per binary, tab-separated:
#   <kind> <file> <working dir, relative to the repo root> <what it is>
# kind is rust-test, rust-example, go-test or go-example. The binaries link
# libmetrale_gpu.so.0 dynamically; their RUNPATH (never RPATH, checked
# below) names this machine's build dir, so LD_LIBRARY_PATH wins there.
set -euo pipefail

if [ $# -ne 1 ] || [ ! -d "$1" ]; then
  echo "usage: $0 <meson-build-dir>" >&2
  exit 2
fi
build=$(cd "$1" && pwd)
root=$(cd "$(dirname "$0")/.." && pwd)
out="$root/.gpu-carry/bindings"

for tool in cargo go python3 readelf strip pkg-config; do
  command -v "$tool" >/dev/null || { echo "gpu-bindings-prep: $tool is not installed" >&2; exit 1; }
done
export PKG_CONFIG_PATH="$build/meson-uninstalled${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
if ! pkg-config --exists metrale_gpu; then
  echo "gpu-bindings-prep: no metrale_gpu.pc under $build/meson-uninstalled (run meson setup and ninja first)" >&2
  exit 1
fi
# The binaries link libmetrale_gpu.so, not the default static archive: the
# GPU machine runs them against its own build of the library (with nvcc's
# device code). METRALE_GPU_LINK=dynamic is the sys crate's choice, and
# -tags metrale_shared Go's (bindings/README.md).
export METRALE_GPU_LINK=dynamic
# The same cargo target and Go cache as `METRALE_GPU_LINK=dynamic
# bindings/test.sh` (Meson's bindings_*_dynamic tests), so the two share work.
export CARGO_TARGET_DIR="$build/bindings-cargo-dynamic"
export GOCACHE="$build/bindings-go/cache" GOPATH="$build/bindings-go/path"
export GOPROXY=off GOFLAGS="-mod=mod -tags=metrale_shared" GOTOOLCHAIN=local GO111MODULE=on
# Explicit, though Debian's linker defaults to it: RUNPATH, which
# LD_LIBRARY_PATH overrides, rather than RPATH, which overrides it.
# (The Rust build scripts pass the same flag with their rpath.)
export CGO_LDFLAGS="${CGO_LDFLAGS:+$CGO_LDFLAGS }-Wl,--enable-new-dtags"

rm -rf "$out"
mkdir -p "$out"
manifest="$out/MANIFEST"
: >"$manifest"

# Reads cargo's JSON messages on stdin; copies every executable of the wanted
# profile ("test" or "example") and adds its manifest line.
collect_cargo_py=$(
  cat <<'PY'
import json, os, shutil, sys
want, out, root = sys.argv[1], sys.argv[2], sys.argv[3]
for line in sys.stdin:
    msg = json.loads(line)
    if msg.get("reason") != "compiler-artifact" or not msg.get("executable"):
        continue
    kinds = msg["target"]["kind"]
    if want == "test" and not msg["profile"]["test"]:
        continue
    if want == "example" and "example" not in kinds:
        continue
    pkg_dir = os.path.dirname(msg["manifest_path"])
    pkg = os.path.basename(pkg_dir)
    name = f"rust-{pkg}-{msg['target']['name']}-{kinds[0]}"
    shutil.copy2(msg["executable"], os.path.join(out, name))
    kind = "rust-test" if want == "test" else "rust-example"
    what = f"cargo {'test' if want == 'test' else 'example'} target {msg['target']['name']} ({kinds[0]}) of {pkg}"
    with open(os.path.join(out, "MANIFEST"), "a") as m:
        m.write(f"{kind}\t{name}\t{os.path.relpath(pkg_dir, root)}\t{what}\n")
PY
)
collect_cargo() { python3 -c "$collect_cargo_py" "$1" "$out" "$root"; }

echo "=== gpu-bindings-prep: rust test binaries"
(cd "$root/bindings/rust" && cargo test --offline --no-run --message-format=json) | collect_cargo test
echo "=== gpu-bindings-prep: rust tour"
(cd "$root/bindings/rust" && cargo build --offline --example tour --message-format=json) | collect_cargo example

echo "=== gpu-bindings-prep: go test binaries"
cd "$root/bindings/go"
# Each package with tests, as "<import path> <dir>".
go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}} {{.Dir}}{{end}}' ./... |
  while read -r pkg dir; do
    [ -n "$pkg" ] || continue
    name="go-$(echo "${pkg#metrale.dev/}" | tr '/' '-').test"
    # -trimpath: the binaries run away from this tree, where the Go binding
    # finds no go.mod above their absolute source paths; trimmed paths
    # still give module-relative sites (bindings/go/site.go).
    go test -c -trimpath -o "$out/$name" "$pkg"
    printf 'go-test\t%s\t%s\tgo test -c of %s\n' "$name" "$(realpath --relative-to="$root" "$dir")" "$pkg" >>"$manifest"
  done
echo "=== gpu-bindings-prep: go tour"
go build -trimpath -o "$out/go-tour" ./examples/tour
printf 'go-example\tgo-tour\tbindings/go\tgo build of ./examples/tour\n' >>"$manifest"
cd "$root"

# None may carry an RPATH. Rust test targets that call nothing of the
# library (lib unit tests, header_drift) lose it to --as-needed; the tours
# and the API tests must link it.
bad=0
while IFS=$'\t' read -r kind name dir what; do
  dyn=$(readelf -d "$out/$name")
  if grep -q '(RPATH)' <<<"$dyn"; then
    echo "gpu-bindings-prep: $name has an RPATH, which LD_LIBRARY_PATH would not override" >&2
    bad=1
  fi
  if grep -q 'Shared library: \[libmetrale_gpu.so.0\]' <<<"$dyn"; then
    runpath=$(sed -n 's/.*(RUNPATH).*Library runpath: \[\(.*\)\]/\1/p' <<<"$dyn")
    echo "  $name: needs libmetrale_gpu.so.0; RUNPATH ${runpath:-none}"
  elif [ "$kind" != rust-test ] || [[ $name == *-api-test ]]; then
    echo "gpu-bindings-prep: $name does not link libmetrale_gpu.so.0" >&2
    bad=1
  fi
done <"$manifest"
[ "$bad" -eq 0 ] || exit 1

# Debug info is most of a Rust test binary's size, and what is carried to
# the GPU machine is limited (64 MiB): drop it. Symbols stay, for backtraces.
while IFS=$'\t' read -r kind name _; do
  [[ $kind == rust-* ]] && strip --strip-debug "$out/$name"
done <"$manifest"

count=$(wc -l <"$manifest")
for kind in rust-test rust-example go-test go-example; do
  grep -q "^$kind	" "$manifest" || { echo "gpu-bindings-prep: no $kind binary was built" >&2; exit 1; }
done
echo "gpu-bindings-prep: $count binaries, $(du -sh "$out" | cut -f1) in ${out#"$root"/}:"
cut -f1,2,4 "$manifest" | sed 's/^/  /'
