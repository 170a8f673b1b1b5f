#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds examples/tour.c with
# nothing but `pkg-config --cflags --libs metrale_gpu` and runs it; then checks
# what was installed and does the same with the static archive (below).
set -euo pipefail
src=$1 build=$2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
meson install -C "$build" --destdir "$work/root" --quiet >/dev/null
prefix=$(meson introspect "$build" --buildoptions |
  python3 -c 'import json,sys; print(next(o["value"] for o in json.load(sys.stdin) if o["name"]=="prefix"))')
root="$work/root$prefix"
pcdir=$(dirname "$(find "$root" -name metrale_gpu.pc | head -n 1)")
export PKG_CONFIG_PATH="$pcdir"
export PKG_CONFIG_SYSROOT_DIR="$work/root"
flags=$(pkg-config --cflags --libs metrale_gpu)
libdir=$(pkg-config --libs-only-L metrale_gpu | sed -e "s/^ *-L//" -e "s/ *$//")
cc -std=c11 -Wall -Wextra -Werror "$src/examples/tour.c" $flags \
  -Wl,-rpath,"$libdir" -o "$work/tour"
echo "built with: cc tour.c $flags"
"$work/tour"

# What the install holds (the static archive and its .pc where it is built),
# and the tour linked against the installed archive through
# metrale_gpu_static.pc, with no rpath, needing no libmetrale_gpu.so.
# $3: "static" where meson.build builds the archive (the default), "shared"
# where it does not (default_library=shared, b_lto).
static=${3:-static}
# (pkgconf prefixes variables with the sysroot; others may not)
libdir_root=$(pkg-config --variable=libdir metrale_gpu)
libdir_root="$work/root${libdir_root#"$work/root"}"
want=("$root/include/metrale_gpu.h" "$pcdir/metrale_gpu.pc" "$libdir_root/libmetrale_gpu.so"
      "$libdir_root/libmetrale_gpu.so.0")
[ "$static" = shared ] || want+=("$libdir_root/libmetrale_gpu.a" "$pcdir/metrale_gpu_static.pc")
for f in "${want[@]}"; do
  [ -e "$f" ] || { echo "FAIL: the install lacks ${f#"$work/root"}" >&2; exit 1; }
done
echo "installed: ${#want[@]} files checked ($(cd "$work/root" && find . -name 'libmetrale_gpu*' -o -name '*.pc' | sort | tr '\n' ' '))"
if [ "$static" = shared ]; then
  echo "no static archive in this build (default_library=shared or b_lto)"
  exit 0
fi
static_flags=$(pkg-config --cflags --libs metrale_gpu_static)
cc -std=c11 -Wall -Wextra -Werror "$src/examples/tour.c" $static_flags -o "$work/tour_static"
echo "built with: cc tour.c $static_flags"
if readelf -d "$work/tour_static" | grep -E 'libmetrale_gpu|\((RPATH|RUNPATH)\)'; then
  echo "FAIL: the static consumer needs libmetrale_gpu.so or carries an rpath (above)" >&2
  exit 1
fi
# readelf above proves it; LD_LIBRARY_PATH stays as the caller set it (the
# GPU machine's spdlog and fmt come through it). tour_static runs one without.
"$work/tour_static" | tail -n 1
