// Red-zone scan over 1k, 10k and 100k live zones: a context with 64-byte red
// zones holding that many 256-byte allocations, all pads intact. The figure
// is one metrale_redzone_scan call (a device pass plus the wait for it).
// Usage: bench_redzone [OUT.json]
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

int main(int argc, char** argv) {
  Report report("bench_redzone");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "redzone_scan")) return report.write(output_path(argc, argv)) ? 0 : 1;
  metrale_context_t* ctx = make_cuda_context(64, 0);
  if (ctx == nullptr) {
    report.skip("redzone_scan", std::string("context with red zones: ") + metrale_last_error_message());
    return report.write(output_path(argc, argv)) ? 0 : 1;
  }
  std::vector<metrale_devptr_t> live;
  live.reserve(100000);
  for (size_t zones : {size_t{1000}, size_t{10000}, size_t{100000}}) {
    const std::string id = "redzone_scan/" + std::to_string(zones / 1000) + "k";
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
      report.skip(id, "allocating the zones failed");
      break;
    }
    std::vector<Case> scan = {{id, [ctx](size_t n) {
                                 for (size_t i = 0; i < n; ++i) {
                                   size_t count = 0;
                                   if (!lib_ok(metrale_redzone_scan(ctx, nullptr, 0, &count),
                                               "metrale_redzone_scan"))
                                     return false;
                                 }
                                 return true;
                               }, nullptr}};
    auto results = run_interleaved(scan, 11, 1);
    Entry e;
    e.group = "redzone_scan";
    e.variant = std::to_string(zones / 1000) + "k_zones";
    e.side = "library";
    e.batch = 1;
    e.timing = "one scan of every pad (device pass + wait), none overwritten";
    e.note = std::to_string(zones) + " live 256-byte allocations with 64-byte pads; allocating "
             "them took " + std::to_string(fill_s) + " s in all";
    if (zones == 10000) e.target = {Target::ABS_NS, 100000};
    add_case(&report, results[0], e);
  }
  for (auto p : live) metrale_free(ctx, p);
  metrale_context_destroy(ctx);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
