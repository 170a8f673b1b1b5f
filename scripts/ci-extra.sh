#!/usr/bin/env bash
# The reliability checks CI runs after the main suite, each in its own build
# directory:
#   1. ASan+UBSan (gcc, stop at the first report) build + the whole suite
#   2. TSan build + the concurrent suites: stress (a smaller count), threads
#      (with thread_slot and fast_mutex),
#      races, reentry, handles, logging, pool (16 threads on 16 streams with
#      cross-stream frees; the pool class's own threads case), quarantine,
#      staging, redzone_owners (threads reusing padded blocks unchecked)
#   3. valgrind over the host suite, reusing the main build
#   4. a bounded libFuzzer pass (clang ASan+UBSan), as a Meson test of its own
#   5. the mutation check (scripts/mutate.sh): the ci tier of
#      scripts/mutations.txt, each one-line mutant of src/ must fail a suite;
#      one testlog line per mutant
# Every check is a Meson test, so each lands in a testlog.json; the paths of
# those files are written to $CI_EXTRA_LOGLIST (when set) for the caller's
# summary. The last line is `N passed, N failed, N skipped` over them; the
# exit status is non-zero on any failure, a failed build, or nothing run.
#
#   scripts/ci-extra.sh [main-build-dir]      (default: build)
# Knobs: CI_EXTRA_SKIP="asan tsan valgrind fuzz mutate" (any subset), FUZZ_SECONDS
# (default 45), TSAN_STRESS_OPS (default 50000), VALGRIND_STRESS_OPS (default 50000),
# MUTATE_ALL=1 (every mutation, not only the ci tier: by hand, ~2x longer).
set -uo pipefail
cd "$(dirname "$0")/.."
main=${1:-build}
# Where ccache is installed (Meson then compiles through it), depend mode:
# a cache miss costs no extra preprocessor run (~8% of a compile).
export CCACHE_DEPEND=${CCACHE_DEPEND:-1}
jobs=$(nproc)
skip=" ${CI_EXTRA_SKIP:-} "
san="-fno-sanitize-recover=all"
logs=()
broken=0

step() { printf '== ci-extra: %s (%ss so far)\n' "$*" "$SECONDS"; }
skipped() { [[ "$skip" == *" $1 "* ]]; }

# The sanitizer builds compile the library as unity files (-Dunity=on):
# about half the compile time on 2 cores, where the builds are most of this
# script's time. The main build and the mutation build stay one object per
# file, so code that compiles only beside its unity neighbours still fails.
# -O1, as the sanitizers' own docs advise: a third less compile time than
# the default -O2, with reports as exact.
unity=(-Dunity=on -Dunity_size=10 -Doptimization=1)

# setup_once DIR [meson options...]: configures DIR unless it already is.
setup_once() {
  local dir=$1
  shift
  [ -f "$dir/build.ninja" ] && return 0
  meson setup "$dir" "$@" >"$dir.setup.log" 2>&1 || { cat "$dir.setup.log"; return 1; }
  rm -f "$dir.setup.log"
}

# build_suites DIR [REGEX]: the library and the cmocka suites (those whose
# name matches REGEX) only. (tests/header_cpp
# takes the address of two library functions without linking the library;
# unsanitized builds fold the comparison away, sanitized ones do not link.)
build_suites() {
  local targets
  # A meson.build changed since the setup: regenerate before listing.
  ninja -C "$1" build.ninja >/dev/null || return 1
  # (tests/lib*.so: modules a suite loads, e.g. the fake NVTX tool;
  # tests/write_report: the program multi_merge_ledger_reports runs)
  targets=$(ninja -C "$1" -t targets all |
    sed -n 's/^\(tests\/test_[a-z0-9_]*\|tests\/lib[a-z0-9_]*\.so\|tests\/write_report\|libmetrale_gpu\.so[.0-9]*\): .*/\1/p' |
    grep -E "^lib|^tests/lib|^tests/write_report|^tests/test_(${2:-.*})\$")
  # shellcheck disable=SC2086
  ninja -C "$1" -j "$jobs" $targets >/dev/null
}

# run_tests DIR LOGBASE [meson test args...]: runs them, records the log.
run_tests() {
  local dir=$1 base=$2
  shift 2
  # With --wrap, Meson appends the wrapper's name: <base>-valgrind.json.
  rm -f "$dir/meson-logs/$base".json "$dir/meson-logs/$base"-*.json
  meson test -C "$dir" --no-rebuild --print-errorlogs --num-processes "$jobs" \
    --logbase "$base" "$@" | tail -n 12
  local found
  found=$(ls "$dir/meson-logs/$base".json "$dir/meson-logs/$base"-*.json 2>/dev/null | head -1)
  if [ -n "$found" ]; then
    logs+=("$found")
  else
    echo "ci-extra: no $dir/meson-logs/$base.json: nothing ran" >&2
    broken=1
  fi
}

if ! skipped asan; then
  step "ASan+UBSan build and the whole suite"
  # default_library=shared: no static archive in the sanitizer builds (its
  # consumer tests run in the main pass), nor its meson setup.
  if setup_once build-asan -Db_sanitize=address,undefined -Dc_args="$san" -Dcpp_args="$san" \
      -Dkernels=disabled -Ddefault_library=shared "${unity[@]}" && build_suites build-asan; then
    # The bindings and tour_pkgconfig link the library from outside Meson,
    # without the ASan runtime: they run in the main pass.
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
      run_tests build-asan asan --no-suite bindings --no-suite examples --no-suite header \
        --no-suite event_log_tools
  else
    echo "ci-extra: the ASan+UBSan build failed" >&2
    broken=1
  fi
fi

if ! skipped tsan; then
  step "TSan build, the stress, threads, races, reentry, handles, logging, pool, quarantine, staging and redzone_owners suites"
  if setup_once build-tsan -Db_sanitize=thread -Dkernels=disabled -Ddefault_library=shared "${unity[@]}" &&
      build_suites build-tsan 'stress|threads|thread_slot|fast_mutex|races|reentry|handles|logging|pool|quarantine|pool_core|staging|staging_core|redzone_owners'; then
    METRALE_STRESS_OPS=${TSAN_STRESS_OPS:-50000} TSAN_OPTIONS=halt_on_error=1:second_deadlock_stack=1 \
      run_tests build-tsan tsan --suite stress --suite threads --suite races --suite reentry \
        --suite handles --suite logging --suite pool --suite quarantine --suite staging \
        --suite redzone_owners
  else
    echo "ci-extra: the TSan build failed" >&2
    broken=1
  fi
fi

if ! skipped valgrind; then
  step "valgrind over the host suite ($main)"
  if command -v valgrind >/dev/null && [ -f "$main/build.ninja" ] &&
      ninja -C "$main" -j "$jobs" >/dev/null; then
    # symbols runs Python and bindings run cargo/go: not this library's errors.
    METRALE_TEST_BACKEND=host METRALE_STRESS_OPS=${VALGRIND_STRESS_OPS:-50000} \
      run_tests "$main" valgrind --no-suite bindings --no-suite symbols --no-suite examples \
      --no-suite event_log_tools \
      --timeout-multiplier 4 \
      --wrap="valgrind -q --error-exitcode=99 --leak-check=full --show-leak-kinds=definite,indirect --errors-for-leak-kinds=definite,indirect"
  else
    echo "ci-extra: valgrind or the main build ($main) is missing" >&2
    broken=1
  fi
fi

if ! skipped fuzz; then
  step "fuzz pass (${FUZZ_SECONDS:-45} s)"
  if command -v clang++ >/dev/null &&
      setup_once build-fuzz-pass fuzz -Dseconds="${FUZZ_SECONDS:-45}"; then
    run_tests build-fuzz-pass testlog
  else
    echo "ci-extra: clang++ or the fuzz project setup is missing" >&2
    broken=1
  fi
fi

if ! skipped mutate; then
  step "mutation check (scripts/mutations.txt)"
  # Its own build of a copy of the tree (build-mutate); the real tree is
  # never edited. A stale entry or a surviving mutant is a failed test.
  MUTATE_JOBS=$jobs bash scripts/mutate.sh
  if [ -s build-mutate/testlog-mutate.json ]; then
    logs+=("build-mutate/testlog-mutate.json")
  else
    echo "ci-extra: the mutation check wrote no log" >&2
    broken=1
  fi
fi

step "done"
if [ -n "${CI_EXTRA_LOGLIST:-}" ]; then printf '%s\n' "${logs[@]}" >"$CI_EXTRA_LOGLIST"; fi
if [ ${#logs[@]} -eq 0 ]; then
  echo "0 passed, 0 failed, 0 skipped"
  exit 1
fi
python3 scripts/summarize-tests.py "${logs[@]}"
rc=$?
[ $broken -eq 0 ] || rc=1
exit $rc
