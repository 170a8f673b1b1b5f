#!/usr/bin/env bash
# The mutation check: applies each one-line mutation of scripts/mutations.txt
# to src/, one at a time, rebuilds, runs the suites the entry names, and
# requires at least one of them to fail ("killed"). A mutant no suite notices
# ("survived"), an entry whose text no longer occurs exactly once ("stale"),
# and a mutant that does not compile are failures.
#
# The real tree is never edited: the script keeps a copy of it in
# $MUTATE_DIR/tree (only files whose content changed are rewritten, so the
# build in $MUTATE_DIR/build stays incremental), mutates the copy, and
# restores each file after its entry (also on exit or interrupt; a copy left
# mutated by a killed run differs from the real file and is rewritten by the
# next run). Restoring a header rebuilds everything that includes it: with
# ccache installed (scripts/install-deps.sh; Meson then compiles through it)
# those objects come from the cache, which halves the cost of a header entry.
#
#   scripts/mutate.sh [--all] [--list FILE] [NAME...]
#     --all     every entry (default: the entries of tier ci)
#     NAME...   only these entries (any tier)
# Knobs: MUTATE_DIR (default build-mutate, build-mutate-cuda on cuda), MUTATE_JOBS (default nproc),
# MUTATE_TIMEOUT (seconds per suite run, default 120), MUTATE_ALL=1 (= --all),
# MUTATE_BACKEND (host, the default, or cuda: the suites run on the GPU, the
# build has the test kernels; with MUTATE_MESON_ARGS, e.g. -Dgpu_archs=90).
# scripts/mutations-gpu.txt lists mutants only a GPU run can kill (stream
# order, which the host backend's at-once streams cannot show):
#   MUTATE_BACKEND=cuda scripts/mutate.sh --all --list scripts/mutations-gpu.txt
# Writes $MUTATE_DIR/testlog-mutate.json, one Meson testlog line per entry
# (plus one for the unmutated baseline), for scripts/summarize-tests.py. The
# last line is `N killed, N survived, N stale, N broken`; the exit status is
# non-zero unless every mutant was killed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
root=$PWD
list=scripts/mutations.txt
all=${MUTATE_ALL:-0}
names=()
while [ $# -gt 0 ]; do
  case $1 in
    --all) all=1 ;;
    --list) list=$2; shift ;;
    -h|--help) sed -n '2,25p' "$0"; exit 0 ;;
    *) names+=("$1") ;;
  esac
  shift
done
backend=${MUTATE_BACKEND:-host}
# A build of its own per backend: the cuda one has the kernels.
if [ "$backend" = cuda ]; then work=${MUTATE_DIR:-build-mutate-cuda}; else work=${MUTATE_DIR:-build-mutate}; fi
case $work in /*) ;; *) work=$root/$work ;; esac
tree=$work/tree
build=$work/build
log=$work/testlog-mutate.json
jobs=${MUTATE_JOBS:-$(nproc)}
limit=${MUTATE_TIMEOUT:-120}
case $backend in
  host) kernels=""; setup_args=(-Dkernels=disabled) ;;
  # shellcheck disable=SC2206
  cuda) kernels=$build/tests/kernels/test_kernels.fatbin
        setup_args=(-Dkernels=enabled ${MUTATE_MESON_ARGS:-}) ;;
  *) echo "mutate: MUTATE_BACKEND is host or cuda, not '$backend'" >&2; exit 2 ;;
esac
# Without a driver the cuda suites skip, and every mutant would "survive".
if [ "$backend" = cuda ] && ! { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; } &&
   ! ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 >/dev/null 2>&1; then
  echo "mutate: MUTATE_BACKEND=cuda needs an NVIDIA driver (libcuda.so.1 not found)" >&2
  exit 2
fi
mkdir -p "$work"
: >"$log"

# --- helpers (Python for exact text handling) --------------------------------

# sync_tree: makes $tree a copy of the project's files (git's view, else every
# file outside build*/ and .git), rewriting only files whose content differs.
sync_tree() {
  python3 - "$root" "$tree" <<'EOF'
import os, shutil, subprocess, sys
root, tree = sys.argv[1], sys.argv[2]
try:
    out = subprocess.run(["git", "-C", root, "ls-files", "-co", "--exclude-standard", "-z"],
                         check=True, capture_output=True).stdout
    files = [f for f in out.decode().split("\0") if f]
except (OSError, subprocess.CalledProcessError):
    files = []
    for d, dirs, names in os.walk(root):
        rel = os.path.relpath(d, root)
        dirs[:] = [x for x in dirs if not (rel == "." and (x.startswith("build") or x == ".git"))]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names]
want = set()
for f in files:
    src = os.path.join(root, f)
    if not os.path.isfile(src) or os.path.islink(src):
        continue
    want.add(f)
    dst = os.path.join(tree, f)
    with open(src, "rb") as a:
        data = a.read()
    try:
        with open(dst, "rb") as b:
            if b.read() == data:
                continue
    except OSError:
        pass
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "wb") as b:  # a new mtime: ninja rebuilds what uses it
        b.write(data)
    shutil.copymode(src, dst)
for d, dirs, names in os.walk(tree):
    for n in names:
        rel = os.path.relpath(os.path.join(d, n), tree)
        if rel not in want:
            os.remove(os.path.join(d, n))
EOF
}

# entries: the list as NUL-separated fields, 8 per entry:
# number, line, name, file, find, replace, suites, tier.
entries() {
  python3 - "$list" <<'EOF'
import sys
path = sys.argv[1]
keys = ("name", "file", "find", "replace", "suites", "tier")
blocks, cur = [], None
with open(path) as f:
    for no, line in enumerate(f, 1):
        line = line.rstrip("\n")
        if line.startswith("#"):
            continue
        if not line.strip():
            cur = None
            continue
        key, sep, value = line.partition(":")
        if not sep:
            sys.exit(f"{path}:{no}: not a 'key: value' line: {line}")
        value = value[1:] if value.startswith(" ") else value
        if cur is None:
            cur = {"line": no}
            blocks.append(cur)
        if key == "why":
            continue
        if key not in keys:
            sys.exit(f"{path}:{no}: unknown key '{key}'")
        if key in cur:
            sys.exit(f"{path}:{no}: '{key}' given twice in one entry")
        cur[key] = value
seen = set()
for i, b in enumerate(blocks, 1):
    missing = [k for k in keys if k not in b]
    if missing:
        sys.exit(f"{path}:{b['line']}: entry {i} lacks {', '.join(missing)}")
    if b["name"] in seen:
        sys.exit(f"{path}:{b['line']}: entry {i}: name '{b['name']}' used twice")
    seen.add(b["name"])
    if b["tier"] not in ("ci", "full"):
        sys.exit(f"{path}:{b['line']}: entry {i}: tier is ci or full, not '{b['tier']}'")
    if not b["file"].startswith("src/") or not b["find"] or not b["suites"].split():
        sys.exit(f"{path}:{b['line']}: entry {i}: file must be under src/, find and suites non-empty")
    for v in (str(i), str(b["line"]), b["name"], b["file"], b["find"], b["replace"],
              b["suites"], b["tier"]):
        sys.stdout.write(v + "\0")
EOF
}

# edit FILE FIND REPLACE: replaces the one occurrence; exit 3 with the count
# on stdout when FIND does not occur exactly once.
edit() {
  python3 - "$@" <<'EOF'
import sys
path, find, repl = sys.argv[1:4]
with open(path) as f:
    text = f.read()
n = text.count(find)
if n != 1:
    print(n)
    sys.exit(3)
with open(path, "w") as f:
    f.write(text.replace(find, repl, 1))
EOF
}

# record NAME RESULT SECONDS TEXT: one testlog line.
record() {
  python3 - "$@" >>"$log" <<'EOF'
import json, sys
name, result, secs, text = sys.argv[1:5]
print(json.dumps({"name": "mutate: " + name, "suite": ["mutate"], "result": result,
                  "returncode": 0 if result == "OK" else 1, "duration": float(secs),
                  "stdout": text, "command": ["scripts/mutate.sh", name]}))
EOF
}

active=""  # the file of $tree now mutated, relative
restore() {
  if [ -n "$active" ]; then
    cat "$root/$active" >"$tree/$active"  # a new mtime: rebuilt next time
    active=""
  fi
}
trap 'restore' EXIT
trap 'restore; exit 130' INT TERM

# build SUITES...: the library and those suites, quietly; the output on failure.
build() {
  local targets=("$lib")
  [ -n "$kernels" ] && targets+=(tests/kernels/test_kernels.fatbin)
  local s
  for s in "$@"; do targets+=("tests/test_$s"); done
  ninja -C "$build" -j "$jobs" "${targets[@]}" >"$work/ninja.log" 2>&1
}

# run_suites SUITES...: 0 when all pass; else 1, the first failing suite's
# name and the tail of its output in $work/suite.log. Each suite runs with
# the caching pool on (the default) and off (METRALE_POOL=0): a mutant of
# either path must be noticed.
run_suites() {
  local s rc pool
  for s in "$@"; do
    for pool in 1 0; do
    env -u METRALE_BACKEND CMOCKA_MESSAGE_OUTPUT=stdout METRALE_TEST_BACKEND="$backend" \
      METRALE_POOL=$pool METRALE_TEST_KERNELS="$kernels" METRALE_LOG=warn timeout "$limit" \
      "$build/tests/test_$s" >"$work/suite.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ]; then
      failed_suite="$s (exit $rc, METRALE_POOL=$pool)"
      return 1
    fi
    done
  done
  return 0
}

# --- main ------------------------------------------------------------------------

start=$SECONDS
sync_tree || { echo "mutate: cannot copy the tree to $tree" >&2; exit 1; }
if [ ! -f "$build/build.ninja" ]; then
  # Unoptimized, no debug info: a mutant compiles in less than half the time.
  meson setup "$build" "$tree" "${setup_args[@]}" -Dbuildtype=plain >"$work/setup.log" 2>&1 ||
    { cat "$work/setup.log"; echo "mutate: meson setup failed" >&2; exit 1; }
fi

if ! entries >"$work/entries.bin"; then
  echo "mutate: $list is malformed (above)" >&2
  exit 1
fi
fields=()
while IFS= read -r -d '' f; do fields+=("$f"); done <"$work/entries.bin"
lib=$(ninja -C "$build" -t targets all | sed -n 's/^\(libmetrale_gpu\.so[.0-9]*\): .*/\1/p' | head -1)
picked=()  # indexes into fields of the entries to run
for ((i = 0; i < ${#fields[@]}; i += 8)); do
  name=${fields[i + 2]} tier=${fields[i + 7]}
  if [ ${#names[@]} -gt 0 ]; then
    for n in "${names[@]}"; do [ "$n" = "$name" ] && picked+=("$i"); done
  elif [ "$all" = 1 ] || [ "$tier" = ci ]; then
    picked+=("$i")
  fi
done
if [ ${#picked[@]} -eq 0 ]; then
  echo "mutate: no entry selected from $list" >&2
  exit 1
fi
# Grouped by file (stable): restoring a file and mutating it again is one
# compile, not two.
mapfile -t picked < <(for i in "${picked[@]}"; do printf '%s\t%s\n' "${fields[i + 3]}" "$i"; done |
  sort -s -t $'\t' -k1,1 | cut -f2)

# The baseline: every suite named passes unmutated, or a kill means nothing.
all_suites=$(for i in "${picked[@]}"; do printf '%s\n' "${fields[i + 6]}"; done | tr ' ' '\n' | sort -u | tr '\n' ' ')
# shellcheck disable=SC2086
echo "mutate: ${#picked[@]} mutants over suites: $all_suites"
t0=$SECONDS
# shellcheck disable=SC2086
if ! build $all_suites; then
  tail -n 30 "$work/ninja.log"
  record baseline FAIL $((SECONDS - t0)) "the unmutated tree does not build"
  echo "mutate: the unmutated tree does not build" >&2
  exit 1
fi
failed_suite=""
# shellcheck disable=SC2086
if ! run_suites $all_suites; then
  tail -n 30 "$work/suite.log"
  record baseline FAIL $((SECONDS - t0)) "unmutated, $failed_suite fails"
  echo "mutate: unmutated, suite $failed_suite fails: fix that first" >&2
  exit 1
fi
record baseline OK $((SECONDS - t0)) "unmutated: every suite passes"

killed=0 survived=0 stale=0 broken=0
for i in "${picked[@]}"; do
  num=${fields[i]} line=${fields[i + 1]} name=${fields[i + 2]} file=${fields[i + 3]}
  find=${fields[i + 4]} repl=${fields[i + 5]} suites=${fields[i + 6]}
  where="entry $num '$name' ($list:$line)"
  t0=$SECONDS
  if [ ! -f "$tree/$file" ]; then
    echo "STALE     $name: $where: $file does not exist"
    record "$name" FAIL 0 "stale: $where: $file does not exist"
    stale=$((stale + 1))
    continue
  fi
  active=$file
  if ! count=$(edit "$tree/$file" "$find" "$repl"); then
    active=""
    echo "STALE     $name: $where: $file has $count occurrences (want 1) of: $find"
    record "$name" FAIL 0 "stale: $where: $file has $count occurrences (want 1) of: $find"
    stale=$((stale + 1))
    continue
  fi
  # shellcheck disable=SC2086
  if ! build $suites; then
    restore
    echo "BROKEN    $name: $where: the mutant does not compile ($work/ninja.log)"
    tail -n 15 "$work/ninja.log"
    record "$name" FAIL $((SECONDS - t0)) "broken: $where: the mutant does not compile"
    broken=$((broken + 1))
    continue
  fi
  failed_suite=""
  # shellcheck disable=SC2086
  if run_suites $suites; then
    restore
    echo "SURVIVED  $name: $where: $file: '$find' -> '$repl'; suites $suites all pass"
    record "$name" FAIL $((SECONDS - t0)) \
      "survived: $where: $file: '$find' -> '$repl'; suites $suites all pass"
    survived=$((survived + 1))
  else
    restore
    printf 'killed    %-28s by %s (%ss)\n' "$name" "$failed_suite" $((SECONDS - t0))
    record "$name" OK $((SECONDS - t0)) "killed by $failed_suite"
    killed=$((killed + 1))
  fi
done

echo "mutate: log $log; $((SECONDS - start)) s"
echo "$killed killed, $survived survived, $stale stale, $broken broken"
[ $((survived + stale + broken)) -eq 0 ]
