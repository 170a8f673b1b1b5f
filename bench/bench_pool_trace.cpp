// bench_pool, trace: the transformer-shaped allocation trace of
// common/alloc_trace (the same one torch_alloc replays through PyTorch's
// caching allocator) replayed through the library's pool (public API, a
// fresh context, three streams) and, on the GPU, the driver's default
// memory pool (cuMemAllocAsync). Rows: time per whole trace, and the peak
// reserved bytes (ours: metrale_pool_stats reserved_bytes after the
// replays, which only grows while no chunk is given back; the driver's:
// CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH).
#include <cstdint>
#include <functional>
#include <vector>

#include "alloc_trace.hpp"
#include "bench_pool.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

namespace bench {

namespace {

// Replays `t` `warmup + repeats` times with `one()` (false: failed) and
// `after()` (untimed: stream syncs); the per-trace times after warm-up.
bool time_replays(size_t warmup, size_t repeats, const std::function<bool()>& one,
                  const std::function<void()>& after, std::vector<double>* samples,
                  double* first_ns) {
  for (size_t r = 0; r < warmup + repeats; ++r) {
    const uint64_t t0 = now_ns();
    if (!one()) return false;
    const uint64_t t1 = now_ns();
    after();
    if (r == 0) *first_ns = double(t1 - t0);
    if (r >= warmup) samples->push_back(double(t1 - t0));
  }
  return true;
}

void add_rows(PoolBench& pb, const AllocTrace& t, const std::string& variant,
              const std::vector<double>& samples, double first_ns, double peak,
              const std::string& peak_note) {
  const std::string shape = std::to_string(t.ops.size()) + " ops, " +
                            std::to_string(t.allocations) + " allocations, 3 streams, peak live " +
                            std::to_string(t.peak_live_bytes >> 20) + " MiB as asked";
  Entry e;
  e.id = "trace_step/" + t.name + "/" + variant;
  e.group = "trace_step";
  e.variant = variant;
  e.side = variant == "library_pool" ? "library" : "raw";
  e.unit = "ns/trace";
  e.stats = summarize(samples);
  e.batch = 1;
  e.raw_ref = "trace_step/" + t.name + "/torch";
  e.timing = "one replay of the whole trace (allocs, frees, record_streams), no sync inside; "
             "first (cold) replay " + std::to_string(int64_t(first_ns / 1e3)) + " µs";
  e.note = shape;
  pb.report->add(e);
  Entry p;
  p.id = "trace_peak_reserved/" + t.name + "/" + variant;
  p.group = "trace_peak_reserved";
  p.variant = variant;
  p.side = e.side;
  p.unit = "bytes";
  p.stats.median = p.stats.p10 = p.stats.p90 = p.stats.min = p.stats.max = peak;
  p.stats.repeats = 1;
  p.batch = 1;
  p.raw_ref = "trace_peak_reserved/" + t.name + "/torch";
  if (variant == "library_pool") p.target = {Target::RATIO, 1.0};
  p.timing = "bytes held from the driver at the peak, over all replays";
  p.note = peak_note + "; " + shape;
  pb.report->add(p);
}

void trace_library(PoolBench& pb, const AllocTrace& t, size_t repeats) {
  const std::string what = "trace_*/" + t.name + "/library_pool";
  std::string why;
  metrale_context_t* ctx = make_pool_context(pb, 1, 0, &why);
  if (ctx == nullptr) return pb.report->skip(what, why);
  std::vector<metrale_stream_t*> s(size_t(t.streams), nullptr);
  for (auto& x : s)
    if (metrale_stream_create(ctx, &x) != METRALE_OK) {
      metrale_context_destroy(ctx);
      return pb.report->skip(what, std::string("metrale_stream_create: ") + metrale_last_error_message());
    }
  std::vector<metrale_devptr_t> ptr(t.allocations, 0);
  auto one = [&] {
    for (const TraceOp& op : t.ops) {
      metrale_stream_t* st = s[op.stream];
      metrale_status_t rc;
      if (op.kind == TraceOp::ALLOC)
        rc = metrale_alloc_async(ctx, op.bytes, st, &ptr[op.id]);
      else if (op.kind == TraceOp::FREE)
        rc = metrale_free_async(ctx, ptr[op.id], st);
      else
        rc = metrale_record_stream(ctx, ptr[op.id], st);
      if (!lib_ok(rc, op.kind == TraceOp::ALLOC ? "metrale_alloc_async"
                      : op.kind == TraceOp::FREE ? "metrale_free_async" : "metrale_record_stream"))
        return false;
    }
    return true;
  };
  uint64_t first_reserved = 0;  // after the first (cold) replay: growth over replays shows
  auto after = [&] {
    for (auto* x : s) metrale_stream_synchronize(ctx, x);
    metrale_pool_stats_t st{};
    st.struct_size = sizeof st;
    if (first_reserved == 0 && metrale_pool_stats(ctx, &st) == METRALE_OK)
      first_reserved = st.reserved_bytes;
  };
  std::vector<double> samples;
  double first = 0;
  if (!time_replays(1, repeats, one, after, &samples, &first)) {
    pb.report->skip(what, std::string("replay failed: ") + metrale_last_error_message());
  } else {
    metrale_pool_stats_t st{};
    st.struct_size = sizeof st;
    if (!lib_ok(metrale_pool_stats(ctx, &st), "metrale_pool_stats")) {
      pb.report->skip(what, metrale_last_error_message());
    } else {
      std::string note = "metrale_pool_stats reserved_bytes after the replays (" +
                         std::to_string(st.chunk_allocs) + " chunk allocations, " +
                         std::to_string(st.chunk_frees) + " chunk frees; peak in use " +
                         std::to_string(st.peak_in_use_bytes >> 20) + " MiB; " +
                         std::to_string(first_reserved >> 20) + " MiB reserved after the first replay)";
      if (st.chunk_frees != 0) note += "; chunks were given back, so this is a lower bound";
      add_rows(pb, t, "library_pool", samples, first, double(st.reserved_bytes), note);
    }
  }
  for (auto* x : s) metrale_stream_destroy(ctx, x);
  metrale_context_destroy(ctx);
}

// The driver's default pool, as a framework would set it up for reuse: the
// release threshold at its maximum during the replays (with the default 0
// every sync gives the memory back), restored after. A free on a stream
// other than the ones the block was used on waits for them with an event,
// which is what record_stream stands for.
void trace_driver(PoolBench& pb, const AllocTrace& t, size_t repeats) {
  const std::string what = "trace_*/" + t.name + "/raw_cuMemAllocAsync";
  const RawDriver& api = pb.api;
  CUmemoryPool mp = nullptr;
  if (!raw_ok(api, api.deviceGetDefaultMemPool(&mp, pb.dev), "cuDeviceGetDefaultMemPool"))
    return pb.report->skip(what, "no default memory pool");
  cuuint64_t old_threshold = 0, max_threshold = UINT64_MAX, zero = 0;
  api.memPoolGetAttribute(mp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &old_threshold);
  api.memPoolSetAttribute(mp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &max_threshold);
  api.ctxSynchronize();
  api.memPoolTrimTo(mp, 0);
  api.memPoolSetAttribute(mp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &zero);  // reset the mark
  std::vector<CUstream> s(size_t(t.streams), nullptr);
  std::vector<CUevent> ev(size_t(t.streams), nullptr);
  for (size_t i = 0; i < s.size(); ++i) {
    api.streamCreate(&s[i], CU_STREAM_NON_BLOCKING);
    api.eventCreate(&ev[i], CU_EVENT_DISABLE_TIMING);
  }
  std::vector<CUdeviceptr> ptr(t.allocations, 0);
  std::vector<uint8_t> used(t.allocations, 0);  // bit per stream the block was used on
  auto one = [&] {
    for (const TraceOp& op : t.ops) {
      CUresult rc = CUDA_SUCCESS;
      if (op.kind == TraceOp::ALLOC) {
        rc = api.memAllocAsync(&ptr[op.id], op.bytes, s[op.stream]);
        used[op.id] = uint8_t(1u << op.stream);
      } else if (op.kind == TraceOp::RECORD) {
        used[op.id] |= uint8_t(1u << op.stream);
      } else {
        for (int r = 0; r < t.streams && rc == CUDA_SUCCESS; ++r)
          if (r != op.stream && (used[op.id] >> r & 1u)) {
            rc = api.eventRecord(ev[size_t(r)], s[size_t(r)]);
            if (rc == CUDA_SUCCESS) rc = api.streamWaitEvent(s[op.stream], ev[size_t(r)], 0);
          }
        if (rc == CUDA_SUCCESS) rc = api.memFreeAsync(ptr[op.id], s[op.stream]);
      }
      if (!raw_ok(api, rc, "replay")) return false;
    }
    return true;
  };
  cuuint64_t first_high = 0;  // the mark after the first (cold) replay
  auto after = [&] {
    for (CUstream x : s) api.streamSynchronize(x);
    if (first_high == 0) api.memPoolGetAttribute(mp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &first_high);
  };
  std::vector<double> samples;
  double first = 0;
  if (!time_replays(1, repeats, one, after, &samples, &first)) {
    pb.report->skip(what, "replay failed");
  } else {
    cuuint64_t high = 0;
    api.memPoolGetAttribute(mp, CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH, &high);
    add_rows(pb, t, "raw_cuMemAllocAsync", samples, first, double(high),
             "CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH of the default pool (release threshold "
             "UINT64_MAX during the replays; " + std::to_string(first_high >> 20) +
             " MiB after the first replay)");
  }
  for (size_t i = 0; i < s.size(); ++i) {
    api.streamDestroy(s[i]);
    api.eventDestroy(ev[i]);
  }
  api.memPoolSetAttribute(mp, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &old_threshold);
  api.ctxSynchronize();
  api.memPoolTrimTo(mp, 0);
}

}  // namespace

void run_pool_trace(PoolBench& pb) {
  // Cached blocks of the earlier parts go back first, so this part starts
  // from a device (or host) with nothing cached.
  for (metrale_context_t* c : {pb.pool, pb.redzone, pb.raw})
    if (c != nullptr) lib_ok(metrale_pool_trim(c, 0, nullptr), "metrale_pool_trim");
  const AllocTrace t = transformer_trace(TraceShape{});
  pb.report->meta("trace", t.name);
  pb.report->meta_number("trace_ops", double(t.ops.size()));
  pb.report->meta_number("trace_peak_live_bytes", double(t.peak_live_bytes));
  const size_t repeats = pb.gpu ? 15 : 5;
  trace_library(pb, t, repeats);
  if (pb.gpu) trace_driver(pb, t, repeats);
}

}  // namespace bench
