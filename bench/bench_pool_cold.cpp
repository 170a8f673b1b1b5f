// bench_pool, cold: what one alloc or free costs when the CPU caches hold
// someone else's data, as inside a framework's step. In a PyTorch training
// step on the H200 a library alloc+free pair took 1569 ns on average against
// 64-256 ns for a bin hit in a tight loop, and an allocator that does almost
// nothing took 876 ns (bench/results/2026-12-04-r9-torch-training-*): what
// is left is the cache lines each call touches. This part measures that on
// any machine, the host backend included.
//
// The transformer trace of common/alloc_trace, on one stream and without
// its record_streams (the shape of PyTorch's calls through
// CUDAPluggableAllocator), is replayed call by call. In the cold rows the
// bench writes an eviction buffer (BENCH_POOL_EVICT_BYTES, default 8 MiB:
// more than a core's L2) before every call; only the calls are timed.
// Rows trace_call/<trace>/<variant>/<cold|warm>, ns per alloc+free pair
// (time inside the calls / allocations), median over replays:
//   library_pool  metrale_alloc_async + metrale_free_async on one stream
//   floor         common/floor_cache.hpp over malloc'd addresses it never
//                 touches: the least an allocator pays, and the ref of
//                 library_pool's rows
#include <cstdint>
#include <cstdlib>
#include <string>
#include <vector>

#include "alloc_trace.hpp"
#include "floor_cache.hpp"
#include "bench_pool.hpp"
#include "bench_stats.hpp"

namespace bench {

namespace {

// Writes one byte per cache line of buf: what was in L1 and L2 is gone.
void evict(std::vector<uint8_t>& buf) {
  for (size_t i = 0; i < buf.size(); i += 64) buf[i] = uint8_t(buf[i] + 1);
}

struct Calls {
  std::vector<double> per_pair_ns;  // one sample per replay
};

// Replays the trace's allocs and frees with alloc(id, bytes) / free(id),
// each timed alone; evict before each when `cold`. false: a call failed.
template <class Alloc, class Free>
bool replay(const AllocTrace& t, bool cold, std::vector<uint8_t>& buf, size_t repeats,
            Alloc&& alloc, Free&& free, Calls* out) {
  for (size_t r = 0; r < repeats + 1; ++r) {  // the first replay warms the cache
    uint64_t inside = 0;
    for (const TraceOp& op : t.ops) {
      if (op.kind == TraceOp::RECORD) continue;
      if (cold) evict(buf);
      const uint64_t t0 = now_ns();
      const bool ok = op.kind == TraceOp::ALLOC ? alloc(op.id, op.bytes) : free(op.id);
      inside += now_ns() - t0;
      if (!ok) return false;
    }
    if (r > 0) out->per_pair_ns.push_back(double(inside) / double(t.allocations));
  }
  return true;
}

void add_row(PoolBench& pb, const AllocTrace& t, const std::string& variant, const char* mode,
             const Calls& c, size_t evict_bytes) {
  Entry e;
  e.id = "trace_call/" + t.name + "/" + variant + "/" + mode;
  e.group = "trace_call";
  e.variant = variant + "/" + mode;
  e.side = variant == "library_pool" ? "library" : "raw";
  e.unit = "ns/pair";
  e.stats = summarize(c.per_pair_ns);
  e.batch = t.allocations;
  if (variant == "library_pool") e.raw_ref = "trace_call/" + t.name + "/floor/" + mode;
  e.timing = std::string("time inside the alloc and free calls of one replay / allocations; ") +
             (std::string(mode) == "cold"
                  ? "before each call " + std::to_string(evict_bytes >> 10) +
                        " KiB written (one byte a line), untimed"
                  : "calls back to back");
  e.note = std::to_string(t.allocations) +
           " allocations on one stream, the trace's record_streams left out";
  pb.report->add(e);
}

}  // namespace

void run_pool_cold(PoolBench& pb) {
  const AllocTrace t = transformer_trace(TraceShape{});
  size_t evict_bytes = size_t{8} << 20;
  if (const char* v = std::getenv("BENCH_POOL_EVICT_BYTES")) {
    const unsigned long long n = std::strtoull(v, nullptr, 10);
    if (n >= 4096 && n <= (1ull << 32)) evict_bytes = size_t(n);
  }
  pb.report->meta("cold_evict_bytes", std::to_string(evict_bytes));
  std::vector<uint8_t> buf(evict_bytes, 1);
  const size_t repeats = pb.gpu ? 7 : 5;

  for (const char* mode : {"warm", "cold"}) {
    const bool cold = std::string(mode) == "cold";
    {
      // Address space only: the floor never touches its blocks.
      FloorCache floor([](size_t bytes) { return std::malloc(bytes); });
      std::vector<void*> ptr(t.allocations, nullptr);
      Calls c;
      const bool ok = replay(
          t, cold, buf, repeats,
          [&](uint32_t id, uint64_t bytes) { return (ptr[id] = floor.alloc(bytes)) != nullptr; },
          [&](uint32_t id) { return floor.free(ptr[id]); }, &c);
      floor.for_each_block([](void* p) { std::free(p); });
      if (ok) {
        add_row(pb, t, "floor", mode, c, evict_bytes);
      } else {
        pb.report->skip("trace_call/*/floor/" + std::string(mode), "malloc failed");
      }
    }
    std::string why;
    metrale_context_t* ctx = make_pool_context(pb, 1, 0, &why);
    const std::string what = "trace_call/*/library_pool/" + std::string(mode);
    if (ctx == nullptr) {
      pb.report->skip(what, why);
      continue;
    }
    metrale_stream_t* s = nullptr;
    if (metrale_stream_create(ctx, &s) != METRALE_OK) {
      pb.report->skip(what, std::string("metrale_stream_create: ") + metrale_last_error_message());
      metrale_context_destroy(ctx);
      continue;
    }
    std::vector<metrale_devptr_t> ptr(t.allocations, 0);
    Calls c;
    const bool ok = replay(
        t, cold, buf, repeats,
        [&](uint32_t id, uint64_t bytes) {
          return metrale_alloc_async(ctx, bytes, s, &ptr[id]) == METRALE_OK;
        },
        [&](uint32_t id) { return metrale_free_async(ctx, ptr[id], s) == METRALE_OK; }, &c);
    if (ok) {
      add_row(pb, t, "library_pool", mode, c, evict_bytes);
    } else {
      pb.report->skip(what, std::string("replay failed: ") + metrale_last_error_message());
    }
    metrale_stream_synchronize(ctx, s);
    metrale_stream_destroy(ctx, s);
    metrale_context_destroy(ctx);
  }
}

}  // namespace bench
