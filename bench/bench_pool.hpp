// Shared state of bench_pool (issue 10): the library's caching pool through
// the public API against the raw driver (cuMemAlloc, cuMemAllocAsync on the
// default memory pool) in the same process. Runs on the cuda backend when a
// driver and device are there, else on the host backend (no raw anchors):
// the pool's CPU cost is then what is measured.
#pragma once

#include <cuda.h>

#include <string>

#include "bench_json.hpp"
#include "metrale_gpu.h"
#include "raw_driver.hpp"

namespace bench {

struct PoolBench {
  Report* report = nullptr;
  bool gpu = false;            // cuda backend and the raw driver anchors
  RawDriver api{};             // valid when gpu
  CUdevice dev = 0;
  CUstream raw_stream = nullptr;
  metrale_backend_t backend = METRALE_BACKEND_HOST;
  metrale_context_t* pool = nullptr;     // pool on, no red zones
  metrale_context_t* redzone = nullptr;  // pool on, 64-byte red zones
  // The same with METRALE_REDZONE_REUSE=8 (8 owners of a block per check).
  metrale_context_t* redzone_reuse = nullptr;
  metrale_context_t* raw = nullptr;      // pool off: every alloc a backend allocation
  size_t repeats = 15;
  size_t fast_batch = 1000;        // pairs per batch on cached paths
  double fill_budget_s = 10;       // most seconds to set up one context's live blocks
};

// A context on pb.backend with the pool on or off and red zones of
// `redzone_bytes`; nullptr (reason in *why) when it cannot be made.
metrale_context_t* make_pool_context(const PoolBench& pb, int pool, size_t redzone_bytes,
                                     std::string* why);

// The per-size rows: alloc_free/<size>/{library_pool, library_pool_redzone,
// library_pool_redzone_reuse8, library_raw, raw_cuMemAlloc,
// raw_cuMemAllocAsync}/live{1k,1M}.
void run_pool_alloc_free(PoolBench& pb);

// alloc_free_threads/<n>/library_pool (and raw_cuMemAllocAsync) for n = 1..16.
void run_pool_threads(PoolBench& pb);

// trace_step/<trace>/{library_pool, raw_cuMemAllocAsync} and
// trace_peak_reserved/<trace>/... .
void run_pool_trace(PoolBench& pb);

// trace_call/<trace>/{library_pool, floor}/{warm, cold}: the trace's calls
// one by one on one stream, cold ones after an eviction buffer is written.
void run_pool_cold(PoolBench& pb);

}  // namespace bench
