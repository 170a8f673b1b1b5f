// Anchor: PyTorch's CUDA caching allocator from C++, measured the way
// bench_alloc and bench_pool measure the library, so the JSON holds it
// beside them in the same run:
//   alloc_free/<size>/torch_cpp_caching_allocator   raw_alloc+raw_delete, nothing else live
//                                                   (256 B, 64 KiB, 1 MiB, 64 MiB: bench_alloc)
//   alloc_free/<size>/torch/live1k, .../live1M      the same with 1k or 1M other 256 B
//                                                   blocks live (bench_pool's sizes and rows)
//   trace_step/<trace>/torch, trace_peak_reserved/<trace>/torch
//                                                   common/alloc_trace replayed through
//                                                   allocate()/recordStream on 3 streams
// Built by bench/run.sh on the GPU machine against the torch package of
// its python3 (not by meson: torch is not a dependency).
// Usage: torch_alloc [OUT.json]
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAStream.h>

#include <dlfcn.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "alloc_trace.hpp"
#include "bench_json.hpp"
#include "bench_stats.hpp"

using namespace bench;
namespace alloc = c10::cuda::CUDACachingAllocator;

// torch_cuda's hooks answer c10's "has this device a primary context?"; this
// program loads c10_cuda only, whose placeholder throws ("Should never been
// called") from MaybeSetDevice inside the allocator. The driver answers
// instead, as CUDAHooks.cpp does in a full libtorch.
namespace c10::cuda::_internal {
C10_CUDA_API void setHasPrimaryContext(bool (*func)(c10::DeviceIndex));
}

namespace {

bool has_primary_context(c10::DeviceIndex device) {
  using GetState = int (*)(int, unsigned*, int*);
  static GetState get_state = [] {
    void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
    return cuda ? reinterpret_cast<GetState>(dlsym(cuda, "cuDevicePrimaryCtxGetState")) : nullptr;
  }();
  unsigned flags = 0;
  int active = 0;
  return get_state != nullptr && get_state(device, &flags, &active) == 0 && active != 0;
}

std::string size_label(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

Case pair_case(const std::string& id, size_t bytes) {
  return {id, [bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) alloc::raw_delete(alloc::raw_alloc(bytes));
            return true;
          },
          nullptr};
}

// The rows bench_alloc compares with (no other blocks live).
void plain_rows(Report& report) {
  for (size_t bytes : {size_t{256}, size_t{64} << 10, size_t{1} << 20, size_t{64} << 20}) {
    const std::string base = "alloc_free/" + size_label(bytes) + "/";
    const size_t batch = bytes >= (64u << 20) ? 20 : bytes >= (1u << 20) ? 200 : 500;
    auto results = run_interleaved({pair_case(base + "torch_cpp_caching_allocator", bytes)}, 15, batch);
    Entry e;
    e.group = "alloc_free";
    e.variant = "torch_cpp_caching_allocator";
    e.side = "anchor";
    e.size_bytes = double(bytes);
    e.batch = batch;
    e.raw_ref = base + "raw_cuMemAlloc";
    e.timing = "raw_alloc immediately followed by raw_delete, per op; served from the cache "
               "after warm-up; no sync";
    add_case(&report, results[0], e);
  }
}

// bench_pool's rows: the same live blocks (256 B, every 9th of live + live/8
// freed first), sizes and batch.
void live_rows(Report& report) {
  const size_t sizes[] = {256, 4096, 65536, size_t{1} << 20, size_t{16} << 20, size_t{64} << 20};
  for (size_t live : {size_t{1000}, size_t{1000000}}) {
    const std::string lv = live >= 1000000 ? "live1M" : "live1k";
    std::vector<void*> held(live + live / 8);
    for (auto& p : held) p = alloc::raw_alloc(256);
    for (size_t i = 0; i < held.size(); i += 9) alloc::raw_delete(held[i]), held[i] = nullptr;
    std::vector<Case> cases;
    for (size_t b : sizes) cases.push_back(pair_case("alloc_free/" + size_label(b) + "/torch/" + lv, b));
    const size_t batch = 1000;
    auto results = run_interleaved(cases, 15, batch);
    for (size_t i = 0; i < results.size(); ++i) {
      Entry e;
      e.group = "alloc_free";
      e.variant = "torch/" + lv;
      e.side = "anchor";
      e.size_bytes = double(sizes[i]);
      e.batch = batch;
      e.timing = "raw_alloc then raw_delete of the same block, per pair, current stream, no sync";
      e.note = std::to_string(live) + " other 256 B blocks live, as bench_pool's rows";
      add_case(&report, results[i], e);
    }
    for (void* p : held)
      if (p != nullptr) alloc::raw_delete(p);
  }
}

// The trace through allocate() (a DataPtr per block) on three pool
// streams; RECORD is recordStream, a FREE on a stream other than the
// block's own records that stream first (torch frees on the allocating
// stream only). Peak: reserved_bytes' peak from getDeviceStats.
void trace_rows(Report& report, c10::DeviceIndex device) {
  const AllocTrace t = transformer_trace(TraceShape{});
  alloc::emptyCache();
  alloc::resetPeakStats(device);
  // Streams from the driver, wrapped: getStreamFromPool needs torch_cuda's
  // device hooks, which this program (c10 only) does not load.
  using StreamCreate = int (*)(void**, unsigned);
  void* cuda = dlopen("libcuda.so.1", RTLD_NOW | RTLD_GLOBAL);
  auto stream_create =
      cuda ? reinterpret_cast<StreamCreate>(dlsym(cuda, "cuStreamCreate")) : nullptr;
  if (stream_create == nullptr) throw std::runtime_error("cuStreamCreate not found");
  using StreamSync = int (*)(void*);
  auto stream_sync = reinterpret_cast<StreamSync>(dlsym(cuda, "cuStreamSynchronize"));
  if (stream_sync == nullptr) throw std::runtime_error("cuStreamSynchronize not found");
  std::vector<c10::cuda::CUDAStream> streams;
  std::vector<void*> raw_streams;
  for (int i = 0; i < t.streams; ++i) {
    void* raw = nullptr;
    if (stream_create(&raw, 1 /* CU_STREAM_NON_BLOCKING */) != 0)
      throw std::runtime_error("cuStreamCreate failed");
    raw_streams.push_back(raw);
    streams.push_back(c10::cuda::getStreamFromExternal(static_cast<cudaStream_t>(raw), device));
  }
  const c10::cuda::CUDAStream saved = c10::cuda::getCurrentCUDAStream(device);
  std::vector<c10::DataPtr> ptr(t.allocations);
  std::vector<uint8_t> alloc_stream(t.allocations, 0);
  std::vector<double> samples;
  double first = 0, first_peak = 0;  // first: the cold replay
  const size_t repeats = 15;
  for (size_t r = 0; r < repeats + 1; ++r) {
    const uint64_t t0 = now_ns();
    for (const TraceOp& op : t.ops) {
      if (op.kind == TraceOp::ALLOC) {
        c10::cuda::setCurrentCUDAStream(streams[op.stream]);
        ptr[op.id] = alloc::get()->allocate(op.bytes);
        alloc_stream[op.id] = op.stream;
      } else if (op.kind == TraceOp::RECORD || op.stream != alloc_stream[op.id]) {
        alloc::recordStream(ptr[op.id], streams[op.stream]);
      }
      if (op.kind == TraceOp::FREE) ptr[op.id].clear();
    }
    const uint64_t t1 = now_ns();
    for (void* s : raw_streams) stream_sync(s);  // CUDAStream::synchronize sets the device
    if (r == 0) first_peak = double(alloc::getDeviceStats(device).reserved_bytes[0].peak);
    if (r == 0) first = double(t1 - t0);
    if (r > 0) samples.push_back(double(t1 - t0));
  }
  c10::cuda::setCurrentCUDAStream(saved);
  const auto stats = alloc::getDeviceStats(device);
  const double peak = double(stats.reserved_bytes[0].peak);  // [0]: StatType::AGGREGATE
  const std::string shape = std::to_string(t.ops.size()) + " ops, " +
                            std::to_string(t.allocations) + " allocations, 3 streams, peak live " +
                            std::to_string(t.peak_live_bytes >> 20) + " MiB as asked";
  Entry e;
  e.id = "trace_step/" + t.name + "/torch";
  e.group = "trace_step";
  e.variant = "torch";
  e.side = "anchor";
  e.unit = "ns/trace";
  e.stats = summarize(samples);
  e.batch = 1;
  e.timing = "one replay of the whole trace (allocate, DataPtr release, recordStream), no sync "
             "inside; first (cold) replay " + std::to_string(int64_t(first / 1e3)) + " µs";
  e.note = shape;
  report.add(e);
  Entry p;
  p.id = "trace_peak_reserved/" + t.name + "/torch";
  p.group = "trace_peak_reserved";
  p.variant = "torch";
  p.side = "anchor";
  p.unit = "bytes";
  p.stats.median = p.stats.p10 = p.stats.p90 = p.stats.min = p.stats.max = peak;
  p.stats.repeats = 1;
  p.batch = 1;
  p.timing = "bytes held from the driver at the peak, over all replays";
  p.note = "getDeviceStats reserved_bytes[AGGREGATE].peak after emptyCache and resetPeakStats, "
           "over all replays (" + std::to_string(int64_t(first_peak) >> 20) +
           " MiB after the first); " + shape;
  report.add(p);
  alloc::emptyCache();
}

}  // namespace

int main(int argc, char** argv) {
  Report report("torch_alloc");
  report.meta("anchor", "PyTorch c10::cuda::CUDACachingAllocator (C++): raw_alloc/raw_delete, "
                        "allocate/recordStream for the trace");
  c10::cuda::_internal::setHasPrimaryContext(has_primary_context);
  try {
    int devices = c10::cuda::device_count();
    if (devices < 1) {
      report.skip("alloc_free/*/torch*, trace_*/torch", "torch sees no CUDA device");
      return report.write(output_path(argc, argv)) ? 0 : 1;
    }
    alloc::init(devices);
    plain_rows(report);
    live_rows(report);
    trace_rows(report, c10::DeviceIndex{0});
  } catch (const std::exception& ex) {
    report.skip("alloc_free/*/torch*, trace_*/torch (rest)", std::string("torch threw: ") + ex.what());
  }
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
