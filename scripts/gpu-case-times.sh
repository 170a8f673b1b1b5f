#!/usr/bin/env bash
# Times each case of one test suite alone, to find the slow or hung one:
#   bash scripts/gpu-case-times.sh BUILD_DIR SUITE [PER_CASE_LIMIT_S]
# Prints "seconds rc case" per case (rc 124: killed at the limit). The case
# names come from the suite's cmocka_unit_test list; the backend and pool
# follow the environment (METRALE_TEST_BACKEND, METRALE_POOL).
set -uo pipefail
cd "$(dirname "$0")/.."
build=$1 suite=$2 limit=${3:-120}
exe=$build/tests/test_$suite
[ -x "$exe" ] || { echo "no $exe" >&2; exit 2; }
for c in $(sed -n 's/.*cmocka_unit_test[_a-z]*(\([a-z0-9_]*\).*/\1/p' "tests/test_$suite.c"); do
  t0=$EPOCHREALTIME
  METRALE_TEST_FILTER=$c timeout "$limit" "$exe" >"/tmp/case_$c.log" 2>&1
  rc=$?
  printf '%7.2f %3s %s\n' "$(awk "BEGIN{print $EPOCHREALTIME - $t0}")" "$rc" "$c"
  [ "$rc" = 0 ] || tail -n 5 "/tmp/case_$c.log" | sed 's/^/    /'
done
