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
if [ ! -f "$build/build.ninja" ]; then
  meson setup "$build" || exit 1
fi
ninja -C "$build" || exit 1
rm -f "$build/meson-logs/testlog.json"
meson test -C "$build" --print-errorlogs --num-processes "$(nproc)" "$@"
python3 scripts/summarize-tests.py "$build/meson-logs/testlog.json"
