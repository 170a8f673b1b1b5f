// The caching pool behind metrale_alloc (issue 10), through the public API,
// against the raw driver in the same process: alloc+free pairs at 256 B ..
// 64 MiB with 1k and 1M other blocks live (pool; pool with red zones; pool
// off; cuMemAlloc; cuMemAllocAsync), 1..16 threads on their own streams,
// and a transformer-shaped allocation trace (bench_pool_threads.cpp,
// bench_pool_trace.cpp). PyTorch's caching allocator is measured on the
// same sizes, live counts and trace by bench/anchors/torch_alloc.cpp in the
// same run; report.py prints the ratios and the goal table.
// Without a driver it runs on the host backend with fewer repeats.
// Usage: bench_pool [OUT.json]
#include "bench_pool.hpp"

#include <sched.h>

#include <cstdlib>
#include <cstring>
#include <functional>
#include <vector>

#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

constexpr size_t kLiveBlockBytes = 256;
const size_t kSizes[] = {256, 4096, 65536, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};

std::string live_label(size_t live) { return live >= 1000000 ? "live1M" : "live1k"; }

// One way to allocate and free: a library context or the raw driver.
struct Path {
  std::string variant;
  std::function<bool(size_t bytes, uint64_t* p)> alloc;
  std::function<bool(uint64_t p)> free;
  std::function<bool()> after_batch;  // inside the timed region (stream sync), may be empty
  bool slow = false;                  // a driver allocation per pair: smaller batches
  std::vector<uint64_t> live;         // the background blocks held while measuring
  std::string skipped;                // why this path has no rows at this live count
};

Path lib_path(const std::string& variant, metrale_context_t* ctx, bool slow) {
  Path p;
  p.variant = variant;
  p.alloc = [ctx](size_t n, uint64_t* out) {
    metrale_devptr_t d = 0;
    if (!lib_ok(metrale_alloc(ctx, n, &d), "metrale_alloc")) return false;
    *out = d;
    return true;
  };
  p.free = [ctx](uint64_t d) { return lib_ok(metrale_free(ctx, d), "metrale_free"); };
  p.slow = slow;
  return p;
}

// Holds `live` + live/8 blocks of 256 B and frees every 9th, so free lists
// hold holes too. Gives up (and frees what it made) when the projected time
// is over the budget: 1M cuMemAlloc calls would take about a minute.
bool fill(Path& p, size_t live, double budget_s) {
  const size_t want = live + live / 8;
  p.live.reserve(want);
  const uint64_t t0 = now_ns();
  while (p.live.size() < want) {
    uint64_t d = 0;
    if (!p.alloc(kLiveBlockBytes, &d)) {
      p.skipped = "allocating the live blocks failed";
      break;
    }
    p.live.push_back(d);
    if (p.live.size() % 4096 == 0) {
      const double per = double(now_ns() - t0) / double(p.live.size());
      if (per * double(want) > budget_s * 1e9) {
        p.skipped = "holding " + std::to_string(live) + " live blocks would take ~" +
                    std::to_string(int(per * double(want) / 1e9)) + " s (" +
                    std::to_string(int(per / 1e3)) + " µs per allocation), over this bench's " +
                    std::to_string(int(budget_s)) + " s budget";
        break;
      }
    }
  }
  if (p.skipped.empty()) {
    for (size_t i = 0; i < p.live.size(); i += 9) p.free(p.live[i]), p.live[i] = 0;
    if (p.after_batch) p.after_batch();
    return true;
  }
  for (uint64_t d : p.live) p.free(d);
  p.live.clear();
  return false;
}

void release(Path& p) {
  for (uint64_t d : p.live)
    if (d != 0) p.free(d);
  p.live.clear();
  if (p.after_batch) p.after_batch();
}

Case pair_case(const std::string& id, const Path& p, size_t bytes) {
  return {id, [&p, bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              uint64_t d = 0;
              if (!p.alloc(bytes, &d) || !p.free(d)) return false;
            }
            return p.after_batch ? p.after_batch() : true;
          },
          nullptr};
}

std::vector<Path> make_paths(PoolBench& pb) {
  std::vector<Path> paths;
  if (pb.pool) paths.push_back(lib_path("library_pool", pb.pool, false));
  if (pb.redzone) paths.push_back(lib_path("library_pool_redzone", pb.redzone, false));
  if (pb.redzone_reuse)
    paths.push_back(lib_path("library_pool_redzone_reuse8", pb.redzone_reuse, false));
  if (pb.raw) paths.push_back(lib_path("library_raw", pb.raw, pb.gpu));
  if (!pb.gpu) return paths;
  const RawDriver* api = &pb.api;
  CUstream s = pb.raw_stream;
  Path m;
  m.variant = "raw_cuMemAlloc";
  m.slow = true;
  m.alloc = [api](size_t n, uint64_t* out) {
    CUdeviceptr d = 0;
    if (!raw_ok(*api, api->memAlloc(&d, n), "cuMemAlloc_v2")) return false;
    *out = d;
    return true;
  };
  m.free = [api](uint64_t d) { return raw_ok(*api, api->memFree(CUdeviceptr(d)), "cuMemFree_v2"); };
  paths.push_back(m);
  Path a;
  a.variant = "raw_cuMemAllocAsync";
  a.alloc = [api, s](size_t n, uint64_t* out) {
    CUdeviceptr d = 0;
    if (!raw_ok(*api, api->memAllocAsync(&d, n, s), "cuMemAllocAsync")) return false;
    *out = d;
    return true;
  };
  a.free = [api, s](uint64_t d) {
    return raw_ok(*api, api->memFreeAsync(CUdeviceptr(d), s), "cuMemFreeAsync");
  };
  a.after_batch = [api, s] { return raw_ok(*api, api->streamSynchronize(s), "cuStreamSynchronize"); };
  paths.push_back(a);
  return paths;
}

void add_row(PoolBench& pb, const CaseResult& r, const Path& p, size_t bytes, size_t live,
             size_t batch) {
  const std::string lv = live_label(live), sz = size_label(bytes);
  Entry e;
  e.group = "alloc_free";
  e.variant = p.variant + "/" + lv;
  e.size_bytes = double(bytes);
  e.batch = batch;
  e.timing = "alloc then free of the same block, per pair, no stream sync";
  e.note = std::to_string(live) + " other 256 B blocks live (" + std::to_string(live / 8) +
           " more allocated and every 9th freed first, so free lists hold holes)";
  if (double(live) * double(bytes) > 16e9)
    e.note += "; the live blocks are small for every size: " + std::to_string(live) +
              " blocks of " + sz + " would not fit";
  const std::string base = "alloc_free/" + sz + "/";
  if (p.variant == "library_pool") {
    e.side = "library";
    e.raw_ref = base + "torch/" + lv;  // PyTorch's caching allocator, same run (anchor)
    e.target = {Target::ABS_NS, live >= 1000000 ? 150.0 : 100.0};
    e.timing = "metrale_alloc (pool on, ledger and call site recorded) then metrale_free, "
               "per pair, no stream sync";
  } else if (p.variant == "library_pool_redzone") {
    e.side = "library";
    e.raw_ref = base + "library_pool/" + lv;
    e.target = {Target::RATIO, 1.3};
    e.timing = "as library_pool, on a context with 64-byte red zones";
  } else if (p.variant == "library_pool_redzone_reuse8") {
    e.side = "library";
    e.raw_ref = base + "library_pool/" + lv;
    e.target = {Target::RATIO, 1.3};
    e.timing = "as library_pool_redzone, with METRALE_REDZONE_REUSE=8: up to 8 owners of a "
               "block (same size, same stream) share one check of its pad";
  } else if (p.variant == "library_raw") {
    e.side = "library";
    if (pb.gpu) e.raw_ref = base + "raw_cuMemAlloc/" + lv;
    e.timing = "metrale_alloc then metrale_free with the pool off (options.pool = 0): a "
               "backend allocation per pair";
  } else {
    e.side = "raw";
    if (p.variant == "raw_cuMemAllocAsync")
      e.timing = "cuMemAllocAsync+cuMemFreeAsync on one stream (default memory pool), one "
                 "cuStreamSynchronize per batch inside the timed region";
  }
  add_case(pb.report, r, e);
}

}  // namespace

namespace bench {

metrale_context_t* make_pool_context(const PoolBench& pb, int pool, size_t redzone_bytes,
                                     std::string* why) {
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = pb.backend;
  opts.pool = pool;
  opts.redzone_bytes = redzone_bytes;
  metrale_context_t* ctx = nullptr;
  metrale_status_t st = metrale_context_create(&opts, &ctx);
  if (st != METRALE_OK) {
    *why = std::string("metrale_context_create: ") + metrale_status_name(st) + ": " +
           metrale_last_error_message();
    return nullptr;
  }
  return ctx;
}

void run_pool_alloc_free(PoolBench& pb) {
  std::vector<Path> paths = make_paths(pb);
  for (size_t live : {size_t{1000}, size_t{1000000}}) {
    const std::string lv = live_label(live);
    std::vector<Path*> ready;
    for (Path& p : paths) {
      p.skipped.clear();
      if (fill(p, live, pb.fill_budget_s))
        ready.push_back(&p);
      else
        pb.report->skip("alloc_free/*/" + p.variant + "/" + lv, p.skipped);
    }
    for (size_t bytes : kSizes) {
      const size_t slow_batch = bytes >= (size_t{16} << 20) ? 20 : 100;
      for (bool slow : {false, true}) {
        std::vector<Case> cases;
        std::vector<Path*> in;
        for (Path* p : ready)
          if (p->slow == slow) {
            cases.push_back(pair_case("alloc_free/" + size_label(bytes) + "/" + p->variant + "/" + lv, *p, bytes));
            in.push_back(p);
          }
        if (cases.empty()) continue;
        const size_t batch = slow ? slow_batch : pb.fast_batch;
        const auto results = run_interleaved(cases, pb.repeats, batch);
        for (size_t i = 0; i < results.size(); ++i) add_row(pb, results[i], *in[i], bytes, live, batch);
      }
    }
    for (Path* p : ready) release(*p);
  }
}

}  // namespace bench

int main(int argc, char** argv) {
  Report report("bench_pool");
  PoolBench pb;
  pb.report = &report;
  // The bench sets every option itself; the environment would change what
  // is measured.
  for (const char* var : {"METRALE_BACKEND", "METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX",
                          "METRALE_CHECKED", "METRALE_DEBUG_SYNC", "METRALE_LAUNCH_TRACE",
                          "METRALE_KERNEL_TIMING", "METRALE_POOL", "METRALE_QUARANTINE"})
    unsetenv(var);
  std::string why;
  pb.gpu = open_raw_driver(0, &pb.api, &pb.dev, &why);
  if (pb.gpu) {
    char name[256] = {0};
    int version = 0;
    pb.api.deviceGetName(name, sizeof name - 1, pb.dev);
    pb.api.driverGetVersion(&version);
    report.meta("device_name", name);
    report.meta_number("driver_api_version", version);
    pb.backend = METRALE_BACKEND_CUDA;
    pb.gpu = raw_ok(pb.api, pb.api.streamCreate(&pb.raw_stream, CU_STREAM_NON_BLOCKING),
                    "cuStreamCreate");
  }
  if (!pb.gpu) {
    report.skip("alloc_free/*/raw_*, alloc_free_threads/*/raw_*, trace_*/raw_cuMemAllocAsync",
                "no raw driver (" + why + "): the library runs on the host backend");
    pb.backend = METRALE_BACKEND_HOST;
    pb.repeats = 7;
    pb.fast_batch = 500;
    pb.fill_budget_s = 6;
  }
  report.meta("backend", pb.gpu ? "cuda" : "host");
  report.meta("live_blocks", "256 B each; 1k or 1M held around each measured pair");
  pb.pool = make_pool_context(pb, 1, 0, &why);
  if (pb.pool == nullptr) report.skip("*/library_pool", why);
  pb.redzone = make_pool_context(pb, 1, 64, &why);
  if (pb.redzone == nullptr) report.skip("*/library_pool_redzone", why);
  setenv("METRALE_REDZONE_REUSE", "8", 1);
  pb.redzone_reuse = make_pool_context(pb, 1, 64, &why);
  unsetenv("METRALE_REDZONE_REUSE");
  if (pb.redzone_reuse == nullptr) report.skip("*/library_pool_redzone_reuse8", why);
  pb.raw = make_pool_context(pb, 0, 0, &why);
  if (pb.raw == nullptr) report.skip("*/library_raw", why);

  // BENCH_POOL_PARTS (comma list of alloc_free, threads, trace, cold; default all)
  // runs a part alone, for a diagnosis; a full run (bench/run.sh) sets none.
  const char* parts = std::getenv("BENCH_POOL_PARTS");
  auto want = [parts](const char* part) {
    return parts == nullptr || *parts == '\0' || std::strstr(parts, part) != nullptr;
  };
  if (want("alloc_free")) {
    // On one core for the single-thread rows: on the H200 machine the same
    // binary measured ~130 or ~210 ns per pair from run to run unpinned (the
    // thread moving between cores), ~130 pinned. The threads part creates
    // its threads after the mask is restored.
    cpu_set_t old_mask, one;
    const bool pinned = sched_getaffinity(0, sizeof old_mask, &old_mask) == 0 && [&] {
      CPU_ZERO(&one);
      CPU_SET(sched_getcpu(), &one);
      return sched_setaffinity(0, sizeof one, &one) == 0;
    }();
    report.meta("alloc_free_pinned_to_one_cpu", pinned ? "yes" : "no");
    run_pool_alloc_free(pb);
    if (pinned) sched_setaffinity(0, sizeof old_mask, &old_mask);
    // Where the red-zone rows' time goes: fills (a device call and a wait
    // each) against skipped fills, and the batch checks.
    auto meta_stats = [&](const char* key, metrale_context_t* ctx) {
      metrale_pool_stats_t st;
      st.struct_size = sizeof st;
      if (ctx == nullptr || metrale_pool_stats(ctx, &st) != METRALE_OK) return;
      report.meta(key, "after alloc_free: pad_fills " + std::to_string(st.pad_fills) +
                           ", pad_fills_skipped " + std::to_string(st.pad_fills_skipped) +
                           ", pad_checks " + std::to_string(st.pad_checks) + ", pads_checked " +
                           std::to_string(st.pads_checked) + ", chunk_allocs " +
                           std::to_string(st.chunk_allocs) + ", reserved_bytes " +
                           std::to_string(st.reserved_bytes));
    };
    meta_stats("redzone_pool_stats", pb.redzone);
    meta_stats("redzone_reuse8_pool_stats", pb.redzone_reuse);
  }
  if (want("threads")) run_pool_threads(pb);
  if (want("trace")) run_pool_trace(pb);
  if (want("cold")) run_pool_cold(pb);
  if (parts != nullptr && *parts != '\0') report.meta("parts", parts);

  metrale_context_destroy(pb.pool);
  metrale_context_destroy(pb.redzone);
  metrale_context_destroy(pb.redzone_reuse);
  metrale_context_destroy(pb.raw);
  if (pb.raw_stream != nullptr) pb.api.streamDestroy(pb.raw_stream);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
