// Red-zone scan over 1k, 10k and 100k live zones: a context with 64-byte red
// zones holding that many 256-byte allocations, all pads intact. The figure
// is one metrale_redzone_scan call (a device pass plus the wait for it).
// Rows per size:
//   <N>k_zones        the table unchanged since the last scan (steady state);
//   <N>k_zones_churn  1% of the zones freed and allocated again before each
//                     scan, untimed (the scan then uploads the changed slots);
// and one anchor, raw_floor: what any device pass pays at least, one empty
// kernel, a 4-byte read back and a stream wait on the raw driver.
// Usage: bench_redzone [OUT.json]
#include <vector>

#include "bench_json.hpp"
#include "bench_kernels.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

constexpr size_t kRepeats = 11;
const char* const kFloorId = "redzone_scan/raw_floor";

bool scan_ok(metrale_context_t* ctx) {
  size_t count = 0;
  return lib_ok(metrale_redzone_scan(ctx, nullptr, 0, &count), "metrale_redzone_scan");
}

// Frees and allocates again every 100th zone (a different tenth each time).
void churn(metrale_context_t* ctx, std::vector<metrale_devptr_t>* live, size_t* round) {
  const size_t start = (*round)++ % 100;
  for (size_t i = start; i < live->size(); i += 100) {
    metrale_free(ctx, (*live)[i]);
    (*live)[i] = 0;
    metrale_alloc(ctx, 256, &(*live)[i]);
  }
}

void add_floor(Report* report, const GpuSession& s, const BenchKernels& k) {
  const RawDriver& api = s.api;
  CUdeviceptr word = 0;
  uint32_t host_word = 0;
  if (!raw_ok(api, api.memAlloc(&word, sizeof host_word), "cuMemAlloc")) return;
  std::vector<Case> floor = {{kFloorId, [&](size_t n) {
                                for (size_t i = 0; i < n; ++i) {
                                  if (!raw_ok(api, api.launchKernel(k.raw_empty, 1, 1, 1, 1, 1, 1, 0,
                                                                    s.raw_stream, nullptr, nullptr),
                                              "cuLaunchKernel") ||
                                      !raw_ok(api, api.memcpyDtoHAsync(&host_word, word,
                                                                       sizeof host_word, s.raw_stream),
                                              "cuMemcpyDtoHAsync") ||
                                      !raw_ok(api, api.streamSynchronize(s.raw_stream),
                                              "cuStreamSynchronize"))
                                    return false;
                                }
                                return true;
                              }, nullptr}};
  auto results = run_interleaved(floor, kRepeats, 1);
  Entry e;
  e.group = "redzone_scan";
  e.variant = "raw_floor";
  e.side = "raw";
  e.batch = 1;
  e.timing = "empty_kernel<<<1,1>>> + 4-byte cuMemcpyDtoHAsync + cuStreamSynchronize";
  e.note = "the least any device pass with a read back costs; the anchor of the scan rows";
  add_case(report, results[0], e);
  api.memFree(word);
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_redzone");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "redzone_scan")) return report.write(output_path(argc, argv)) ? 0 : 1;
  BenchKernels k;
  const bool have_floor = load_bench_kernels(&s, &k, &report, "redzone_scan/raw_floor");
  metrale_context_t* ctx = make_cuda_context(64, 0);
  if (ctx == nullptr) {
    report.skip("redzone_scan", std::string("context with red zones: ") + metrale_last_error_message());
    return report.write(output_path(argc, argv)) ? 0 : 1;
  }
  if (have_floor) add_floor(&report, s, k);
  std::vector<metrale_devptr_t> live;
  live.reserve(100000);
  size_t churn_round = 0;
  for (size_t zones : {size_t{1000}, size_t{10000}, size_t{100000}}) {
    const std::string label = std::to_string(zones / 1000) + "k";
    bool ok = true;
    uint64_t t0 = now_ns();
    while (live.size() < zones) {
      metrale_devptr_t p = 0;
      if (!lib_ok(metrale_alloc(ctx, 256, &p), "metrale_alloc (red zone)")) {
        ok = false;
        break;
      }
      live.push_back(p);
    }
    double fill_s = static_cast<double>(now_ns() - t0) / 1e9;
    if (!ok) {
      report.skip("redzone_scan/" + label, "allocating the zones failed");
      break;
    }
    std::vector<Case> scan = {
        // Its after() churns, untimed: the churn case, next in the round,
        // scans the changed table and leaves it unchanged for this one.
        {"redzone_scan/" + label, [ctx](size_t n) {
           for (size_t i = 0; i < n; ++i)
             if (!scan_ok(ctx)) return false;
           return true;
         }, [ctx, &live, &churn_round] { churn(ctx, &live, &churn_round); }},
        {"redzone_scan/" + label + "_churn", [ctx](size_t n) {
           for (size_t i = 0; i < n; ++i)
             if (!scan_ok(ctx)) return false;
           return true;
         }, nullptr}};
    // One scan first: the zones just allocated are all changes.
    if (!scan_ok(ctx)) {
      report.skip("redzone_scan/" + label, "the first scan failed");
      break;
    }
    auto results = run_interleaved(scan, kRepeats, 1);
    const char* variants[] = {"_zones", "_zones_churn"};
    const char* timings[] = {
        "one scan of every pad (device pass + wait), none overwritten, table unchanged since "
        "the last scan",
        "one scan of every pad (device pass + wait), none overwritten, after 1% of the zones "
        "were freed and allocated again (untimed)"};
    for (size_t v = 0; v < 2; ++v) {
      Entry e;
      e.group = "redzone_scan";
      e.variant = label + variants[v];
      e.side = "library";
      e.batch = 1;
      e.timing = timings[v];
      if (have_floor) e.raw_ref = kFloorId;
      e.note = std::to_string(zones) + " live 256-byte allocations with 64-byte pads; allocating "
               "them took " + std::to_string(fill_s) + " s in all";
      if (zones == 10000) e.target = {Target::ABS_NS, 50000};
      if (zones == 100000) e.target = {Target::ABS_NS, 150000};
      add_case(&report, results[v], e);
    }
  }
  for (auto p : live) metrale_free(ctx, p);
  metrale_context_destroy(ctx);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
