// Pinned host alloc+free: the library with its pinned pool on
// (library_pool: a recurring size is served from freed blocks), with it off
// (library_nopool: every call is the backend's), and on cuda the raw driver
// (cuMemHostAlloc with the library's flags + cuMemFreeHost) as the anchor.
// Public API only, so it runs on any backend; on the host backend the
// nopool figure is aligned_alloc + free plus the library's bookkeeping.
// Usage: bench_pinned [host|cuda] [OUT.json]   (either order; default host, stdout)
#include <cstdlib>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "metrale_gpu.h"
#ifdef BENCH_RAW_DRIVER
#include "raw_driver.hpp"
#endif

using namespace bench;

namespace {

constexpr size_t kRepeats = 15;

bool ok(metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return true;
  note_failure(std::string(call) + ": " + metrale_status_name(st) + ": " + metrale_last_error_message());
  return false;
}

std::string label(size_t bytes) {
  return bytes >= (1u << 20) ? std::to_string(bytes >> 20) + "MiB" : std::to_string(bytes >> 10) + "KiB";
}

metrale_context_t* open_ctx(metrale_backend_t backend, int pinned_pool) {
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = backend;
  opts.pinned_pool = pinned_pool;
  metrale_context_t* ctx = nullptr;
  return metrale_context_create(&opts, &ctx) == METRALE_OK ? ctx : nullptr;
}

Case lib_case(const std::string& id, metrale_context_t* ctx, size_t bytes) {
  return {id, [ctx, bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              void* p = nullptr;
              if (!ok(metrale_host_alloc_pinned(ctx, bytes, &p), "metrale_host_alloc_pinned")) return false;
              if (!ok(metrale_host_free_pinned(ctx, p), "metrale_host_free_pinned")) return false;
            }
            return true;
          },
          nullptr};
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_pinned");
  std::string backend = "host", out = "-";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "host" || arg == "cuda")
      backend = arg;
    else
      out = arg;
  }
  for (const char* var : {"METRALE_BACKEND", "METRALE_PINNED_POOL", "METRALE_CHECKED"}) unsetenv(var);
  metrale_log_set_level(METRALE_LOG_WARN);
  const metrale_backend_t kind = backend == "cuda" ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST;
  metrale_context_t* pool = open_ctx(kind, 1);
  metrale_context_t* nopool = open_ctx(kind, 0);
  if (pool == nullptr || nopool == nullptr) {
    report.skip("pinned_alloc_free", "no " + backend + " context: " + metrale_last_error_message());
    metrale_context_destroy(pool);
    metrale_context_destroy(nopool);
    return report.write(out) ? 0 : 1;
  }
  metrale_device_info_t info;
  if (metrale_device_info(pool, &info) == METRALE_OK) report.meta("device_name", info.name);
  report.meta("backend", backend);

#ifdef BENCH_RAW_DRIVER
  RawDriver api{};
  CUdevice dev = 0;
  std::string why;
  const bool raw = backend == "cuda" && open_raw_driver(0, &api, &dev, &why);
  if (backend == "cuda" && !raw) report.skip("pinned_alloc_free/*/raw_cuMemHostAlloc", why);
#else
  if (backend == "cuda") report.skip("pinned_alloc_free/*/raw_cuMemHostAlloc", "built without cuda.h");
#endif

  for (size_t bytes : {size_t{64} << 10, size_t{1} << 20}) {
    const std::string base = "pinned_alloc_free/" + label(bytes) + "/";
    const std::string raw_id = base + "raw_cuMemHostAlloc";
    std::vector<Case> cases;
    cases.push_back(lib_case(base + "library_pool", pool, bytes));
    cases.push_back(lib_case(base + "library_nopool", nopool, bytes));
#ifdef BENCH_RAW_DRIVER
    if (raw) {
      cases.push_back({raw_id, [&api, bytes](size_t n) {
                         for (size_t i = 0; i < n; ++i) {
                           void* p = nullptr;
                           CUresult rc = api.memHostAlloc(
                               &p, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
                           if (rc != CUDA_SUCCESS) {
                             note_failure("cuMemHostAlloc: " + raw_error(api, rc));
                             return false;
                           }
                           rc = api.memFreeHost(p);
                           if (rc != CUDA_SUCCESS) {
                             note_failure("cuMemFreeHost: " + raw_error(api, rc));
                             return false;
                           }
                         }
                         return true;
                       },
                       nullptr});
    }
#endif
    // The unpooled paths cost ~0.7 ms a call on an H200: small batches.
    const size_t batch = backend == "cuda" ? 20 : 200;
    for (const auto& r : run_interleaved(cases, kRepeats, batch)) {
      Entry e;
      e.group = "pinned_alloc_free";
      e.variant = r.id.substr(base.size());
      e.size_bytes = static_cast<double>(bytes);
      e.batch = batch;
      e.timing = "one metrale_host_alloc_pinned followed by its free, per op";
      if (e.variant == "library_pool") {
        e.side = "library";
        if (backend == "cuda") e.raw_ref = raw_id;
        e.target = {Target::ABS_NS, 1000};
        e.note = "pinned pool on (the default): after the first round every call is a cache hit";
      } else if (e.variant == "library_nopool") {
        e.side = "library";
        if (backend == "cuda") e.raw_ref = raw_id;
        e.note = "pinned_pool = 0: every call allocates and frees through the backend";
      } else {
        e.side = "raw";
        e.timing = "cuMemHostAlloc (DEVICEMAP | PORTABLE, as the library) + cuMemFreeHost, per op";
      }
      add_case(&report, r, e);
    }
  }
  metrale_context_destroy(pool);
  metrale_context_destroy(nopool);
  return report.write(out) ? 0 : 1;
}
