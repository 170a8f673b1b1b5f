#!/usr/bin/env bash
# Installs what the build and the tests need on Debian/Ubuntu, when missing.
# The CUDA toolkit is optional: without nvcc the library still builds (the
# cuda backend then fills red zones with memsets) and runs on the host backend.
set -euo pipefail
need=()
command -v meson >/dev/null || need+=(meson)
command -v ninja >/dev/null || need+=(ninja-build)
command -v pkg-config >/dev/null || need+=(pkg-config)
pkg-config --exists cmocka 2>/dev/null || need+=(libcmocka-dev)
pkg-config --exists spdlog 2>/dev/null || need+=(libspdlog-dev)
command -v go >/dev/null || need+=(golang-go)
command -v cc >/dev/null || need+=(gcc g++)
command -v python3 >/dev/null || need+=(python3)
# Headless Chromium draws metrale-timeline's page in the timeline test.
command -v chromium >/dev/null || command -v chromium-browser >/dev/null || need+=(chromium)
# The reliability checks (scripts/ci-extra.sh): clang's libFuzzer and
# sanitizer runtimes, and valgrind.
command -v clang++ >/dev/null || need+=(clang)
command -v valgrind >/dev/null || need+=(valgrind)
# The mutation check restores each mutated header; Meson compiles through
# ccache when it is installed, so that restore rebuilds from the cache.
command -v ccache >/dev/null || need+=(ccache)
clang_major=$(clang++ --version 2>/dev/null | sed -n 's/.*clang version \([0-9]*\).*/\1/p' | head -n 1)
clang_major=${clang_major:-14}
ls /usr/lib/llvm-"$clang_major"/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
  need+=("libclang-rt-$clang_major-dev")
# The Python package's tests (bindings/python) run under pytest.
python3 -c 'import pytest' 2>/dev/null || need+=(python3-pytest)
if [ ${#need[@]} -gt 0 ]; then
  echo "install-deps: installing ${need[*]}"
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  export DEBIAN_FRONTEND=noninteractive
  $sudo apt-get update -qq
  $sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
# Rust is needed by the Rust binding tests only; the test script skips them
# (and says so) where cargo is absent and cannot be installed.
if ! command -v cargo >/dev/null && [ -x "$HOME/.cargo/bin/cargo" ]; then
  echo "install-deps: cargo is in $HOME/.cargo/bin (add it to PATH)"
fi
