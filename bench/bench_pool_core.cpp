// The caching pool class on its own (src/core/pool), compiled into this
// program over a fake chunk source (addresses from a counter, events that
// complete at once): alloc+free pairs of one size, 256 B to 64 MiB, with 1k
// and 1M other blocks live, on one thread and on 16 threads with a stream
// each. No backend, no ledger: the floor under the public path that issue
// 10 measures on the H200 (goal for that whole path: <= 100 ns at 1k live,
// <= 150 ns at 1M live).
// Usage: bench_pool_core [OUT.json]
#include <atomic>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "core/pool/caching_pool.hpp"
#include "fake_chunk_source.hpp"

using namespace bench;
using metrale::core::pool::CachingPool;
using metrale::core::pool::DevPtr;
using metrale::core::pool::StreamId;

namespace {

constexpr StreamId kLiveStream = 0x10;
constexpr StreamId kStream = 0x20;
constexpr int kThreads = 16;

std::string size_label(size_t b) {
  if (b >= (size_t{1} << 20)) return std::to_string(b >> 20) + "MiB";
  if (b >= 1024) return std::to_string(b >> 10) + "KiB";
  return std::to_string(b) + "B";
}

// 16 threads, each with its own stream, each timing `per_thread` pairs; the
// figure is wall time / all pairs (what the pool sustains), per repeat.
Stats threaded(CachingPool& pool, size_t bytes, size_t per_thread, size_t repeats) {
  std::vector<double> samples;
  for (size_t r = 0; r < repeats + 1; ++r) {
    std::atomic<int> ready{0};
    std::atomic<bool> go{false};
    std::vector<std::thread> ts;
    for (int t = 0; t < kThreads; ++t) {
      ts.emplace_back([&, t] {
        const StreamId s = kStream + 1 + static_cast<StreamId>(t);
        ready.fetch_add(1);
        while (!go.load(std::memory_order_acquire)) std::this_thread::yield();
        for (size_t i = 0; i < per_thread; ++i) pool.free(pool.allocate(bytes, s));
      });
    }
    while (ready.load() < kThreads) std::this_thread::yield();
    const uint64_t t0 = now_ns();
    go.store(true, std::memory_order_release);
    for (auto& t : ts) t.join();
    const uint64_t t1 = now_ns();
    if (r > 0) samples.push_back(double(t1 - t0) / double(per_thread * kThreads));
  }
  return summarize(samples);
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_pool_core");
  const std::string out = output_path(argc, argv);
  report.meta("backend", "none (the pool class alone, fake chunks and events)");
  report.meta_number("threads_multi", kThreads);
  report.meta_number("hardware_threads", std::thread::hardware_concurrency());
  const std::vector<size_t> sizes = {256,       4096,           65536,
                                     size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};
  for (size_t live : {size_t{1000}, size_t{1000000}}) {
    pooltest::FakeChunkSource src;
    src.auto_complete = true;
    CachingPool pool(src);
    // The live blocks: mixed small sizes, one stream, every 8th freed again
    // so the free indexes hold holes too.
    std::mt19937_64 rng(7);
    std::vector<metrale::core::pool::Block*> held;
    held.reserve(live + live / 8);
    while (held.size() < live + live / 8) held.push_back(pool.allocate(256 + rng() % 16384, kLiveStream));
    for (size_t i = 0; i < held.size(); i += 9) pool.free(held[i]);
    const std::string label = live >= 1000000 ? "1M" : std::to_string(live / 1000) + "k";
    const size_t batch = 2000;
    std::vector<Case> cases;
    for (size_t b : sizes) {
      cases.push_back({"pool_core_alloc_free/" + size_label(b) + "/" + label + "_live/1_thread",
                       [&pool, b](size_t n) {
                         for (size_t i = 0; i < n; ++i) {
                           pool.free(pool.allocate(b, kStream));
                         }
                         return true;
                       },
                       nullptr});
    }
    const auto results = run_interleaved(cases, 21, batch);
    for (size_t i = 0; i < sizes.size(); ++i) {
      Entry e;
      e.group = "pool_core_alloc_free/" + size_label(sizes[i]) + "/" + label + "_live";
      e.variant = "pool_core_1_thread";
      e.side = "library";
      e.size_bytes = double(sizes[i]);
      e.batch = batch;
      e.timing = "CachingPool::allocate then free of the same block on one stream, per pair, " +
                 std::to_string(pool.stats().blocks_in_use) + " other blocks live";
      e.note = "the pool class alone (mutex, best-fit set; the caller keeps the block), no backend, no ledger";
      e.target = {Target::ABS_NS, live >= 1000000 ? 150.0 : 100.0};
      add_case(&report, results[i], e);
    }
    for (size_t b : sizes) {
      Entry e;
      e.id = "pool_core_alloc_free/" + size_label(b) + "/" + label + "_live/16_threads";
      e.group = "pool_core_alloc_free/" + size_label(b) + "/" + label + "_live";
      e.variant = "pool_core_16_threads";
      e.side = "library";
      e.size_bytes = double(b);
      e.batch = 20000;
      e.stats = threaded(pool, b, 20000, 11);
      e.timing = "16 threads, a stream each, allocate+free pairs; wall time / all pairs";
      e.note = "one pool mutex; on a machine with " +
               std::to_string(std::thread::hardware_concurrency()) + " hardware threads";
      report.add(e);
    }
    for (size_t i = 0; i < held.size(); ++i)
      if (i % 9 != 0) pool.free(held[i]);
  }
  return report.write(out) ? 0 : 1;
}
