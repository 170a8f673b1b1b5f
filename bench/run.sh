#!/usr/bin/env bash
# Runs the benchmarks and writes bench/results/<date>-<gpu>.json and .md
# (copied to $OUT when it is set).
#
#   bash bench/run.sh [BUILD_DIR]          (default build-bench)
#
# On a machine with an NVIDIA driver: configures BUILD_DIR with
# -Dkernels=enabled when needed (a fresh one also with -Dtests=false), builds,
# runs bench_alloc, bench_launch, bench_graph, bench_copy, bench_redzone,
# bench_pool, bench_ledger (host backend) and bench_pinned, then the anchors:
# PyTorch's caching allocator from C++ (built here against python3's torch
# package, with common/alloc_trace for the pool trace) and torch/CuPy from
# Python. A part that cannot run leaves a "skipped" entry saying why.
# Without a driver it runs bench_ledger, bench_pinned, bench_pool and
# bench_launch_host (the library's own launch path) on the
# host backend (bench_pool with fewer repeats) and says so.
# BENCH_LABEL names the machine in the results (e.g. "2-core CI machine");
# BENCH_GIT_COMMIT gives the commit where the tree has no .git; BENCH_WORK_DIR keeps
# the fragments (see below).
set -uo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-bench}
export METRALE_LOG=${METRALE_LOG:-warn}
day=$(date -u +%Y-%m-%d)
# BENCH_WORK_DIR keeps each program's fragment (and its stderr) there, so a
# run cut short still leaves what it measured (report.py can merge them).
if [ -n "${BENCH_WORK_DIR:-}" ]; then
  work=$BENCH_WORK_DIR
  mkdir -p "$work"
else
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi

have_gpu=0
if { ldconfig -p 2>/dev/null | grep -q 'libcuda\.so\.1'; } ||
   ls /usr/lib/x86_64-linux-gnu/libcuda.so.1 /usr/lib64/libcuda.so.1 >/dev/null 2>&1; then
  have_gpu=1
fi

# spdlog/fmt on the GPU machine come from .gpu-deps, as in scripts/gpu-test.sh.
if [ -z "${PKG_CONFIG_LIBDIR:-}" ] && [ -f .gpu-deps/unpack-deps.sh ] &&
   ! pkg-config --exists spdlog 2>/dev/null; then
  echo "bench: spdlog not found by pkg-config; unpacking .gpu-deps" >&2
  eval "$(bash .gpu-deps/unpack-deps.sh)" || exit 1
fi

if [ "$have_gpu" = 1 ]; then
  if [ -f "$build/build.ninja" ]; then
    meson configure "$build" -Dkernels=enabled || exit 1
  else
    meson setup "$build" -Dkernels=enabled -Dtests=false || exit 1
  fi
  ninja -C "$build" || exit 1
else
  echo "bench: no NVIDIA driver here (libcuda.so.1 not found): running bench_ledger and bench_pool on the host backend only" >&2
  if [ ! -f "$build/build.ninja" ]; then
    meson setup "$build" -Dtests=false || exit 1
  fi
  ninja -C "$build" bench/bench_ledger bench/bench_ledger_core bench/bench_pool_core bench/bench_pinned \
    bench/bench_event_log bench/bench_launch_host || exit 1
  # bench_pool is built only where cuda.h was found (for its raw anchors).
  pool_why="not built: meson found no cuda.h (bench_pool takes its types for the raw anchors)"
  if ninja -C "$build" -t targets all 2>/dev/null | grep -q '^bench/bench_pool:'; then
    pool_why="did not build (see the ninja output above)"
    ninja -C "$build" bench/bench_pool || echo "bench: bench_pool did not build" >&2
  fi
fi
if [ ! -x "$build/bench/bench_ledger" ]; then
  echo "bench: $build/bench/bench_ledger was not built: does meson.build have subdir('bench')?" >&2
  exit 1
fi

# run_part NAME CMD...: runs CMD with the fragment path appended; when it
# fails or writes nothing, writes a fragment that says so.
run_part() {
  local name=$1; shift
  local frag="$work/$name.json"
  echo "bench: running $name" >&2
  timeout 300 "$@" "$frag" 2> "$work/$name.err"
  local rc=$?
  tail -n 20 "$work/$name.err" >&2
  if [ "$rc" -ne 0 ] || [ ! -s "$frag" ]; then
    python3 - "$name" "$rc" "$work/$name.err" "$frag" <<'PY'
import json, sys
name, rc, err, frag = sys.argv[1:5]
try:
    tail = open(err, errors="replace").read().strip().splitlines()[-3:]
except OSError:
    tail = []
why = f"exit code {rc}" + (" (timed out after 300 s)" if rc == "124" else "")
if tail:
    why += "; stderr: " + " | ".join(tail)
try:
    doc = json.load(open(frag))
except Exception:
    doc = {"program": name, "meta": {}, "results": [], "skipped": []}
doc["skipped"].append({"what": "whole program" if not doc["results"] else "rest of program", "why": why})
json.dump(doc, open(frag, "w"))
PY
  fi
  frags+=("$frag")
}

frags=()
if [ "$have_gpu" = 1 ]; then
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | head -n 1)
  BENCH_NVIDIA_DRIVER=$(nvidia-smi --query-gpu=driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  export BENCH_NVIDIA_DRIVER
  [ -n "$gpu" ] || gpu=gpu
  label=${BENCH_LABEL:-"$gpu, $(nproc) CPU threads"}
  for part in alloc launch graph copy redzone; do
    run_part "bench_$part" "$build/bench/bench_$part"
  done
  run_part bench_pool "$build/bench/bench_pool"
  run_part bench_ledger "$build/bench/bench_ledger" host
  run_part bench_ledger_core "$build/bench/bench_ledger_core"
  run_part bench_event_log "$build/bench/bench_event_log" cuda
  run_part bench_pool_core "$build/bench/bench_pool_core"
  run_part bench_pinned "$build/bench/bench_pinned" cuda
  # Peer copies vs cuMemcpyPeerAsync and NCCL all-reduce (issue 13; ~10 s).
  run_part bench_peer "$build/bench/bench_peer"

  # Anchor: PyTorch's caching allocator from C++, built against python3's torch.
  torch_exe="$build/bench/torch_alloc"
  if torch_dir=$(python3 -c 'import torch,os;print(os.path.dirname(torch.__file__))' 2>"$work/torch.err"); then
    abi=$(python3 -c 'import torch;print(int(torch._C._GLIBCXX_USE_CXX11_ABI))')
    site=$(dirname "$torch_dir")
    cuda_inc=""
    # The full toolkit first: the pip-packaged headers lack crt/host_config.h.
    for d in /usr/local/cuda/include "$site"/nvidia/cuda_runtime/include "$site"/nvidia/cu*/include; do
      if [ -f "$d/cuda_runtime_api.h" ]; then cuda_inc=$d; break; fi
    done
    # libc10_cuda finds libcudart through its own RUNPATH at run time; ld
    # need not resolve it at link time.
    rpath_links=()
    for d in "$site"/nvidia/*/lib; do [ -d "$d" ] && rpath_links+=("-Wl,-rpath-link,$d"); done
    echo "bench: building torch_alloc against $torch_dir (ABI $abi, cuda headers ${cuda_inc:-none})" >&2
    if g++ -std=c++17 -O2 -D_GLIBCXX_USE_CXX11_ABI="$abi" \
         -I bench/common -isystem "$torch_dir/include" \
         -isystem "$torch_dir/include/torch/csrc/api/include" ${cuda_inc:+-isystem "$cuda_inc"} \
         bench/anchors/torch_alloc.cpp bench/common/alloc_trace.cpp \
         bench/common/bench_stats.cpp bench/common/bench_json.cpp \
         -L "$torch_dir/lib" -lc10_cuda -lc10 -ldl -Wl,-rpath,"$torch_dir/lib" \
         -Wl,--allow-shlib-undefined "${rpath_links[@]}" \
         -o "$torch_exe" 2> "$work/torch_build.err"; then
      run_part torch_alloc "$torch_exe"
    else
      tail -n 20 "$work/torch_build.err" >&2
      python3 -c 'import json,sys; why=open(sys.argv[2],errors="replace").read().strip().splitlines()[-3:]; json.dump({"program":"torch_alloc","meta":{},"results":[],"skipped":[{"what":"alloc_free/*/torch*, trace_*/torch","why":"building against torch failed: "+" | ".join(why)}]},open(sys.argv[1],"w"))' \
        "$work/torch_alloc.json" "$work/torch_build.err"
      frags+=("$work/torch_alloc.json")
    fi
  else
    python3 -c 'import json,sys; why=open(sys.argv[2],errors="replace").read().strip().splitlines()[-1:]; json.dump({"program":"torch_alloc","meta":{},"results":[],"skipped":[{"what":"alloc_free/*/torch*, trace_*/torch","why":"python3 has no torch: "+" | ".join(why)}]},open(sys.argv[1],"w"))' \
      "$work/torch_alloc.json" "$work/torch.err"
    frags+=("$work/torch_alloc.json")
  fi
  run_part py_anchors python3 bench/anchors/py_anchors.py
else
  gpu=host
  label=${BENCH_LABEL:-"host backend, $(nproc)-CPU $(hostname) (no GPU)"}
  run_part bench_ledger "$build/bench/bench_ledger" host
  run_part bench_ledger_core "$build/bench/bench_ledger_core"
  run_part bench_event_log "$build/bench/bench_event_log" host
  run_part bench_pool_core "$build/bench/bench_pool_core"
  run_part bench_launch_host "$build/bench/bench_launch_host"
  if [ -x "$build/bench/bench_pool" ]; then
    run_part bench_pool "$build/bench/bench_pool"
  else
    python3 -c 'import json,sys; json.dump({"program":"bench_pool","meta":{},"results":[],"skipped":[{"what":"whole program","why":sys.argv[2]}]},open(sys.argv[1],"w"))' "$work/bench_pool.json" "$pool_why"
    frags+=("$work/bench_pool.json")
  fi
  run_part bench_pinned "$build/bench/bench_pinned" host
fi

slug=$(printf '%s' "$gpu" | tr 'A-Z' 'a-z' | tr -cs 'a-z0-9' '-' | sed 's/^-*//; s/-*$//')
mkdir -p bench/results
base="bench/results/$day-$slug"
python3 bench/report.py --json "$base.json" --md "$base.md" --label "$label" "${frags[@]}" || exit 1
if [ -n "${OUT:-}" ]; then
  mkdir -p "$OUT"
  cp -f "$base.json" "$base.md" "$OUT/"
fi
cat "$base.md"
