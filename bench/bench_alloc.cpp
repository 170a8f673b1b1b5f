// alloc+free through the library (ledger only; ledger + red zones) against
// the raw driver (cuMemAlloc_v2/cuMemFree_v2; cuMemAllocAsync/cuMemFreeAsync
// on one stream), at 256 B, 64 KiB, 1 MiB and 64 MiB.
// Usage: bench_alloc [OUT.json]
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

constexpr size_t kRedzoneBytes = 64;
constexpr size_t kRepeats = 15;

size_t batch_for(size_t bytes) { return bytes >= (64u << 20) ? 20 : bytes >= (1u << 20) ? 200 : 500; }

Case lib_case(const std::string& id, metrale_context_t* ctx, size_t bytes) {
  return {id, [ctx, bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              metrale_devptr_t p = 0;
              if (!lib_ok(metrale_alloc(ctx, bytes, &p), "metrale_alloc")) return false;
              if (!lib_ok(metrale_free(ctx, p), "metrale_free")) return false;
            }
            return true;
          },
          nullptr};
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_alloc");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "alloc_free")) return report.write(output_path(argc, argv)) ? 0 : 1;
  metrale_context_t* rz_ctx = make_cuda_context(kRedzoneBytes, 0);
  if (rz_ctx == nullptr) report.skip("alloc_free/*/library_redzone64", "context with red zones failed");
  const RawDriver& api = s.api;
  CUstream stream = s.raw_stream;

  for (size_t bytes : {size_t{256}, size_t{64} << 10, size_t{1} << 20, size_t{64} << 20}) {
    const std::string base = "alloc_free/" + size_label(bytes) + "/";
    std::vector<Case> cases;
    cases.push_back(lib_case(base + "library_ledger", s.ctx, bytes));
    if (rz_ctx != nullptr) cases.push_back(lib_case(base + "library_redzone64", rz_ctx, bytes));
    cases.push_back({base + "raw_cuMemAlloc", [&api, bytes](size_t n) {
                       for (size_t i = 0; i < n; ++i) {
                         CUdeviceptr p = 0;
                         if (!raw_ok(api, api.memAlloc(&p, bytes), "cuMemAlloc_v2")) return false;
                         if (!raw_ok(api, api.memFree(p), "cuMemFree_v2")) return false;
                       }
                       return true;
                     },
                     nullptr});
    cases.push_back({base + "raw_cuMemAllocAsync", [&api, stream, bytes](size_t n) {
                       for (size_t i = 0; i < n; ++i) {
                         CUdeviceptr p = 0;
                         if (!raw_ok(api, api.memAllocAsync(&p, bytes, stream), "cuMemAllocAsync"))
                           return false;
                         if (!raw_ok(api, api.memFreeAsync(p, stream), "cuMemFreeAsync")) return false;
                       }
                       return raw_ok(api, api.streamSynchronize(stream), "cuStreamSynchronize");
                     },
                     nullptr});
    size_t batch = batch_for(bytes);
    auto results = run_interleaved(cases, kRepeats, batch);
    for (const auto& r : results) {
      Entry e;
      e.group = "alloc_free";
      e.variant = r.id.substr(base.size());
      e.size_bytes = static_cast<double>(bytes);
      e.batch = batch;
      e.timing = "one alloc immediately followed by its free, per op; no stream sync";
      if (e.variant == "library_ledger") {
        e.side = "library";
        e.raw_ref = base + "raw_cuMemAlloc";
        e.target = {Target::RATIO, 1.02};
      } else if (e.variant == "library_redzone64") {
        e.side = "library";
        e.raw_ref = base + "raw_cuMemAlloc";
        e.note = "64-byte red zone: allocates bytes+64, fills the pad on the device and waits; "
                 "more work than the raw call by design, so no wrapper target";
      } else if (e.variant == "raw_cuMemAllocAsync") {
        e.side = "raw";
        e.timing = "stream-ordered alloc+free on one stream, one cuStreamSynchronize per batch "
                   "included in the timed region";
      } else {
        e.side = "raw";
      }
      add_case(&report, r, e);
    }
  }
  metrale_context_destroy(rz_ctx);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
