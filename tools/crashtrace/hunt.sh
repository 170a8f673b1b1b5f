#!/usr/bin/env bash
# Hunts an intermittent crash of one cmocka case: runs it over and over in
# PARALLEL loops at once (the load that shook it out), each for SECONDS,
# under the crashtrace preload (crashtrace.c), and keeps the output of every
# failed run with the library's frames named by addr2line.
#   bash tools/crashtrace/hunt.sh BUILD_DIR TEST CASE PARALLEL SECONDS OUT_DIR
# e.g. METRALE_TEST_BACKEND=cuda bash tools/crashtrace/hunt.sh build-gpu \
#        test_races streams_destroyed_beside_passes_lose_nothing 16 120 out
# The environment passes through (METRALE_TEST_BACKEND, METRALE_POOL, ...).
set -uo pipefail
build=$1 test=$2 case=$3 parallel=$4 seconds=$5 out=$6
mkdir -p "$out"
shim="$out/libcrashtrace.so"
cc -O1 -g -shared -fPIC -o "$shim" "$(dirname "$0")/crashtrace.c" -ldl || exit 1
kernels=$(find "$build/tests/kernels" -name '*.fatbin' 2>/dev/null | head -n 1)
lib=$(find "$build" -maxdepth 1 -name "libmetrale_gpu.so.*.*" -type f | head -n 1)
loop() {
  local id=$1 runs=0 fails=0 end=$((SECONDS + seconds))
  while [ "$SECONDS" -lt "$end" ]; do
    runs=$((runs + 1))
    if ! CMOCKA_MESSAGE_OUTPUT=stdout METRALE_TEST_KERNELS="$kernels" METRALE_TEST_FILTER="$case" \
        LD_PRELOAD="$shim" "$build/tests/$test" >"$out/run-$id.txt" 2>&1; then
      fails=$((fails + 1))
      f="$out/fail-$id-$runs.txt"
      mv "$out/run-$id.txt" "$f"
      # lib(+0xOFFSET) frames of the library, named.
      grep -o 'libmetrale_gpu[^(]*(+0x[0-9a-f]*)' "$f" | sed 's/.*(+\(0x[0-9a-f]*\))/\1/' |
        while read -r off; do
          printf '%s ' "$off"; addr2line -f -C -i -e "$lib" "$off" | tr '\n' ' '; echo
        done >"$f.frames"
    fi
  done
  rm -f "$out/run-$id.txt"
  echo "loop $id: $runs runs, $fails failed"
}
for i in $(seq 1 "$parallel"); do loop "$i" >"$out/loop-$i.sum" & done
wait
cat "$out"/loop-*.sum
runs=$(cat "$out"/loop-*.sum | awk '{r += $3; f += $5} END {print r " runs, " f " failed"}')
echo "hunt: $runs"
