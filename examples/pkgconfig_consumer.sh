#!/usr/bin/env bash
# Installs the build into a scratch prefix, then builds examples/tour.c with
# nothing but `pkg-config --cflags --libs metrale_gpu` and runs it.
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
