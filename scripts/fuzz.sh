#!/usr/bin/env bash
# Builds the libFuzzer harness (fuzz/) against a clang ASan+UBSan build of the
# library and runs it for a given time on the host backend.
#
#   scripts/fuzz.sh <seconds> [libFuzzer args...]
#
# The library is built in ${FUZZ_BUILD_DIR:-build-fuzz} (meson, CC=clang,
# instrumented for coverage with -fsanitize=fuzzer-no-link). The committed
# seeds in fuzz/corpus/ are read; new inputs go to <build>/corpus, crashes to
# <build>/artifacts/. Exits non-zero when the fuzzer found a crash, a leak or
# a broken invariant (the input is saved and its path printed).
set -uo pipefail
cd "$(dirname "$0")/.."
secs=${1:?usage: scripts/fuzz.sh <seconds> [libFuzzer args...]}
shift
build=$(realpath -m "${FUZZ_BUILD_DIR:-build-fuzz}")
jobs=${FUZZ_JOBS:-$(nproc)}
san_args="-fno-sanitize-recover=all -fsanitize=fuzzer-no-link"

if [ ! -f "$build/build.ninja" ]; then
  CC=clang CXX=clang++ meson setup "$build" \
    -Db_sanitize=address,undefined -Db_lundef=false -Dtests=false -Dkernels=disabled -Ddefault_library=shared \
    -Dunity=on -Dunity_size=10 \
    -Dc_args="$san_args" -Dcpp_args="$san_args" >"$build.setup.log" 2>&1 ||
    { cat "$build.setup.log"; exit 1; }
  rm -f "$build.setup.log"
fi
# The library only (the harness links it); unity: a third of the compile time.
lib=$(ninja -C "$build" -t targets all | sed -n 's/^\(libmetrale_gpu\.so[.0-9]*\): .*/\1/p' | head -1)
ninja -C "$build" -j "$jobs" "$lib" >/dev/null || { ninja -C "$build" -j1 "$lib"; exit 1; }

harness="$build/fuzz_abi"
newest_src=$(ls -t fuzz/*.cpp fuzz/*.hpp "$build"/libmetrale_gpu.so* 2>/dev/null | head -1)
if [ ! -x "$harness" ] || [ "$newest_src" -nt "$harness" ]; then
  clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=all \
    -Iinclude fuzz/*.cpp -L"$build" -lmetrale_gpu -Wl,-rpath,"$build" -o "$harness" || exit 1
fi

mkdir -p "$build/corpus" "$build/artifacts"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# -error_exitcode: libFuzzer's default, 77, is what Meson reads as "skipped".
"$harness" -max_total_time="$secs" -error_exitcode=1 -timeout=20 -rss_limit_mb=2048 -max_len=4096 \
  -print_final_stats=1 -artifact_prefix="$build/artifacts/" "$@" "$build/corpus" fuzz/corpus
