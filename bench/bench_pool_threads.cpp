// bench_pool, threads: n = 1, 2, 4, 8, 16 threads, each with a stream of
// its own, doing metrale_alloc_async / metrale_free_async pairs on it (and
// cuMemAllocAsync / cuMemFreeAsync on a CUstream each, on the GPU). The
// figure is wall time / all pairs, so perfect scaling divides the 1-thread
// figure by n; the ratio against the 1-thread row is in the report.
#include <atomic>
#include <functional>
#include <thread>
#include <vector>

#include "bench_pool.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

namespace bench {

namespace {

constexpr size_t kThreadBytes = 4096;
const int kThreadCounts[] = {1, 2, 4, 8, 16};

// One repeat: n threads start together, each runs body(t); the wall time
// from the start signal to the last join, per pair. Negative when a body
// failed.
double timed_round(int n, size_t pairs, const std::function<bool(int)>& body) {
  std::atomic<int> ready{0};
  std::atomic<bool> go{false}, failed{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < n; ++t)
    ts.emplace_back([&, t] {
      ready.fetch_add(1);
      while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
      if (!body(t)) failed.store(true);
    });
  while (ready.load() < n) std::this_thread::yield();
  const uint64_t t0 = now_ns();
  go.store(true, std::memory_order_release);
  for (auto& t : ts) t.join();
  const uint64_t t1 = now_ns();
  return failed.load() ? -1.0 : double(t1 - t0) / double(pairs * size_t(n));
}

void run_variant(PoolBench& pb, const std::string& variant, size_t per_thread,
                 const std::function<bool(int)>& setup, const std::function<bool(int, size_t)>& body,
                 const std::function<void()>& teardown) {
  for (int n : kThreadCounts) {
    const std::string id = "alloc_free_threads/" + std::to_string(n) + "/" + variant;
    if (!setup(n)) {
      pb.report->skip(id, "setting up the streams failed");
      continue;
    }
    std::vector<double> samples;
    bool ok = true;
    for (size_t r = 0; r < pb.repeats + 1 && ok; ++r) {
      const double v = timed_round(n, per_thread, [&](int t) { return body(t, per_thread); });
      ok = v >= 0;
      if (r > 0) samples.push_back(v);  // the first round warms the per-stream caches
    }
    teardown();
    if (!ok) {
      pb.report->skip(id, "a thread's alloc or free failed");
      continue;
    }
    Entry e;
    e.id = id;
    e.group = "alloc_free_threads";
    e.variant = variant;
    e.side = variant == "library_pool" ? "library" : "raw";
    e.size_bytes = double(kThreadBytes);
    e.batch = per_thread;
    e.stats = summarize(samples);
    e.raw_ref = "alloc_free_threads/1/" + variant;
    e.timing = std::to_string(n) + " threads, a stream each, " + std::to_string(per_thread) +
               " alloc+free pairs of 4 KiB per thread; wall time / all pairs";
    e.note = "ratio vs the 1-thread row: 1/n is perfect scaling; " +
             std::to_string(std::thread::hardware_concurrency()) + " hardware threads here";
    pb.report->add(e);
  }
}

}  // namespace

void run_pool_threads(PoolBench& pb) {
  const size_t per_thread = pb.gpu ? 5000 : 2000;
  if (pb.pool != nullptr) {
    metrale_context_t* ctx = pb.pool;
    std::vector<metrale_stream_t*> streams;
    // 1k other blocks live, as in alloc_free/*/live1k.
    std::vector<metrale_devptr_t> live(1000);
    for (auto& d : live) metrale_alloc(ctx, 256, &d);
    auto setup = [&](int n) {
      for (int i = 0; i < n; ++i) {
        metrale_stream_t* s = nullptr;
        if (metrale_stream_create(ctx, &s) != METRALE_OK) return false;
        streams.push_back(s);
      }
      return true;
    };
    auto body = [&](int t, size_t pairs) {
      metrale_stream_t* s = streams[size_t(t)];
      for (size_t i = 0; i < pairs; ++i) {
        metrale_devptr_t d = 0;
        if (metrale_alloc_async(ctx, kThreadBytes, s, &d) != METRALE_OK) return false;
        if (metrale_free_async(ctx, d, s) != METRALE_OK) return false;
      }
      return true;
    };
    auto teardown = [&] {
      for (auto* s : streams) {
        metrale_stream_synchronize(ctx, s);
        metrale_stream_destroy(ctx, s);
      }
      streams.clear();
    };
    run_variant(pb, "library_pool", per_thread, setup, body, teardown);
    for (auto d : live) metrale_free(ctx, d);
  }
  if (!pb.gpu) return;
  const RawDriver& api = pb.api;
  CUcontext cu = nullptr;
  api.ctxGetCurrent(&cu);
  std::vector<CUstream> cs;
  auto setup = [&](int n) {
    for (int i = 0; i < n; ++i) {
      CUstream s = nullptr;
      if (api.streamCreate(&s, CU_STREAM_NON_BLOCKING) != CUDA_SUCCESS) return false;
      cs.push_back(s);
    }
    return true;
  };
  auto body = [&](int t, size_t pairs) {
    CUstream s = cs[size_t(t)];
    if (api.ctxSetCurrent(cu) != CUDA_SUCCESS) return false;
    for (size_t i = 0; i < pairs; ++i) {
      CUdeviceptr d = 0;
      if (api.memAllocAsync(&d, kThreadBytes, s) != CUDA_SUCCESS) return false;
      if (api.memFreeAsync(d, s) != CUDA_SUCCESS) return false;
    }
    return api.streamSynchronize(s) == CUDA_SUCCESS;
  };
  auto teardown = [&] {
    for (CUstream s : cs) api.streamDestroy(s);
    cs.clear();
  };
  run_variant(pb, "raw_cuMemAllocAsync", per_thread, setup, body, teardown);
}

}  // namespace bench
