#!/usr/bin/env bash
# The newcomer's first command: installs what is missing, builds, runs the
# tour (on the GPU when one answers, else on the host backend).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
build=${BUILD_DIR:-build}
[ -f "$build/build.ninja" ] || meson setup "$build" -Dtests=false >/dev/null
ninja -C "$build" examples/tour >/dev/null
"$build/examples/tour"
