#!/usr/bin/env bash
# A C consumer's first run against libmetrale_gpu.a (Meson test tour_static):
#   1. builds examples/tour.c with nothing but
#      `pkg-config --cflags --libs metrale_gpu_static` (the build tree's
#      meson-uninstalled .pc) and no rpath;
#   2. checks that the program needs no libmetrale_gpu.so (readelf, ldd);
#   3. runs it with LD_LIBRARY_PATH unset (or without any folder holding a
#      libmetrale_gpu.so);
#   4. links it again beside clash.c, which defines, as C functions that
#      abort, every strong global function of the archive but the metrale_* API
#      before its hidden symbols were made local (PRELINKED): the link must
#      not report "multiple definition" and the tour must not call them.
# Usage: static_consumer.sh SRCDIR BUILDDIR PRELINKED_ARCHIVE
set -euo pipefail
src=$1 build=$2 prelinked=$3
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# No folder that holds a libmetrale_gpu.so stays on LD_LIBRARY_PATH (it is
# unset where nothing else is on it, as in CI); the folders of spdlog and
# fmt stay, where they come from there (the GPU machine's .gpu-deps).
keep=()
IFS=: read -ra dirs <<<"${LD_LIBRARY_PATH:-}"
for d in "${dirs[@]}"; do
  [ -n "$d" ] && ! compgen -G "$d/libmetrale_gpu.so*" >/dev/null && keep+=("$d")
done
if [ ${#keep[@]} -gt 0 ]; then
  LD_LIBRARY_PATH=$(IFS=:; echo "${keep[*]}")
  export LD_LIBRARY_PATH
else
  unset LD_LIBRARY_PATH
fi
export PKG_CONFIG_PATH="$build/meson-uninstalled"

# The build tree's .pc holds absolute paths (its dependencies' folders as
# Meson found them): a PKG_CONFIG_SYSROOT_DIR (the GPU machine's unpacked
# spdlog and fmt) would prefix them a second time.
flags=$(env -u PKG_CONFIG_SYSROOT_DIR pkg-config --cflags --libs metrale_gpu_static)
echo "built with: cc tour.c $flags"
# shellcheck disable=SC2086
cc -std=c11 -Wall -Wextra -Werror "$src/examples/tour.c" $flags -o "$work/tour"

dyn=$(readelf -d "$work/tour")
if grep -q 'libmetrale_gpu' <<<"$dyn"; then
  echo "FAIL: the static consumer still needs the shared library:" >&2
  grep NEEDED <<<"$dyn" >&2
  exit 1
fi
if grep -Eq '\((RPATH|RUNPATH)\)' <<<"$dyn"; then
  echo "FAIL: the static consumer carries an rpath, which would hide a missing library" >&2
  exit 1
fi
if ldd "$work/tour" | grep -E 'not found|libmetrale_gpu'; then
  echo "FAIL: ldd finds an unresolved or libmetrale_gpu dependency (above)" >&2
  exit 1
fi
echo "needs: $(sed -n 's/.*Shared library: \[\(.*\)\]/\1/p' <<<"$dyn" | tr '\n' ' ')"
"$work/tour" >"$work/tour.out" 2>&1 || { cat "$work/tour.out"; echo "FAIL: the tour failed" >&2; exit 1; }
tail -n 3 "$work/tour.out"

# Step 4: the library's internal function names, defined again by the consumer.
names=$(nm --defined-only --extern-only "$prelinked" | awk '$2 == "T" && $3 !~ /^metrale_/ { print $3 }' | sort -u)
count=$(wc -l <<<"$names")
if [ -z "$names" ] || [ "$count" -lt 20 ]; then
  echo "FAIL: only $count internal function names in $prelinked (expected the library's C++ internals)" >&2
  exit 1
fi
{
  echo '#include <stdio.h>'
  echo '#include <stdlib.h>'
  while read -r n; do
    echo "void $n(void);"
    echo "void $n(void) { fputs(\"the library called the consumer's $n\\n\", stderr); abort(); }"
  done <<<"$names"
} >"$work/clash.c"
# shellcheck disable=SC2086
cc -std=c11 -w "$src/examples/tour.c" "$work/clash.c" $flags -o "$work/tour_clash"
"$work/tour_clash" >"$work/tour_clash.out" 2>&1 || {
  tail -n 5 "$work/tour_clash.out"
  echo "FAIL: the tour beside $count same-named consumer functions failed" >&2
  exit 1
}
echo "linked and ran beside $count consumer functions named as the library's internals"
