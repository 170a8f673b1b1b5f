#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test: the cmocka suites on
# the host backend (and on cuda where METRALE_TEST_BACKEND=cuda and a GPU
# answers), the examples, the bindings. Its last line is the summary
# `N passed, N failed, N skipped`, counted from Meson's test log.
set -uo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh || exit 1
export PATH="$PATH:$HOME/.cargo/bin"
build=${BUILD_DIR:-build}
# Where ccache is installed (Meson then compiles through it), depend mode:
# a cache miss costs no extra preprocessor run (~8% of a compile).
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" || exit 1
fi
ninja -C "$build" || exit 1
rm -f "$build/meson-logs/testlog.json"
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" "$@"
logs=("$build/meson-logs/testlog.json")
# The cmocka suites again with the caching pool off (rule 9: both paths are
# supported); their own log.
if [ $# -eq 0 ]; then
  rm -f "$build/meson-logs/pool-off.json"
  METRALE_POOL=0 meson test -C "$build" --no-rebuild --print-errorlogs \
    --num-processes "$(nproc)" --logbase pool-off --no-suite bindings --no-suite examples \
    --no-suite symbols --no-suite header | tail -n 8
  logs+=("$build/meson-logs/pool-off.json")
fi
# The reliability checks (scripts/ci-extra.sh: ASan+UBSan, TSan, valgrind, a
# fuzz pass), each a Meson test in its own testlog; skipped when the caller
# picked tests or set METRALE_CI_EXTRA=0.
extra_rc=0
if [ $# -eq 0 ] && [ "${METRALE_CI_EXTRA:-1}" != 0 ]; then
  list="$build/meson-logs/ci-extra-testlogs.txt"
  rm -f "$list"
  CI_EXTRA_LOGLIST="$list" bash scripts/ci-extra.sh "$build" || extra_rc=$?
  if [ -f "$list" ]; then mapfile -t -O ${#logs[@]} logs <"$list"; fi
fi
python3 scripts/summarize-tests.py "${logs[@]}"
rc=$?
[ $extra_rc -eq 0 ] || rc=1
exit $rc
