// Ledger record+forget with 1k, 100k and 1M live allocations, and the text
// report at 1M live. Public API only, so it runs on any backend; on the host
// backend (the default here, and what CI runs) a figure is the whole
// metrale_alloc + metrale_free path, including the host backend's own
// allocation of the bytes. malloc+free of the same size is measured beside
// it so the ledger's share can be read off.
// Usage: bench_ledger [host|cuda] [OUT.json]   (either order; default host, stdout)
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "metrale_gpu.h"

using namespace bench;

namespace {

constexpr size_t kBytes = 64;
constexpr int kSites = 100;  // live allocations spread over 100 file:line sites

bool ok(metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return true;
  note_failure(std::string(call) + ": " + metrale_status_name(st) + ": " + metrale_last_error_message());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_ledger");
  std::string backend = "host", out = "-";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "host" || arg == "cuda")
      backend = arg;
    else
      out = arg;
  }
  for (const char* var : {"METRALE_BACKEND", "METRALE_REDZONE", "METRALE_CHECKED",
                          "METRALE_LAUNCH_TRACE", "METRALE_KERNEL_TIMING", "METRALE_DEBUG_SYNC"})
    unsetenv(var);
  metrale_log_set_level(METRALE_LOG_WARN);
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = backend == "cuda" ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST;
  metrale_context_t* ctx = nullptr;
  if (!ok(metrale_context_create(&opts, &ctx), "metrale_context_create")) {
    report.skip("ledger", std::string("no ") + backend + " context: " + metrale_last_error_message());
    return report.write(out) ? 0 : 1;
  }
  metrale_device_info_t info;
  if (metrale_device_info(ctx, &info) == METRALE_OK) report.meta("device_name", info.name);
  report.meta("backend", backend);
  report.meta_number("hardware_threads", std::thread::hardware_concurrency());

  std::vector<metrale_devptr_t> live;
  live.reserve(1000000);
  const std::string path_note =
      backend == "host"
          ? "host backend: the whole public path, metrale_alloc + metrale_free, including the "
            "host backend's allocation of the 64 bytes (see malloc_free beside it)"
          : "cuda backend: metrale_alloc + metrale_free including cuMemAlloc/cuMemFree";
  for (size_t n : {size_t{1000}, size_t{100000}, size_t{1000000}}) {
    const std::string label = n >= 1000000 ? "1M" : std::to_string(n / 1000) + "k";
    bool filled = true;
    while (live.size() < n) {
      metrale_devptr_t p = 0;
      int line = static_cast<int>(live.size() % kSites) + 1;
      if (!ok(metrale_alloc_at(ctx, kBytes, "bench/live_site.c", line, &p), "metrale_alloc_at")) {
        report.skip("ledger_record_forget/" + label, "filling the ledger failed");
        filled = false;
        break;
      }
      live.push_back(p);
    }
    if (!filled) break;
    const std::string group = "ledger_record_forget/" + label + "_live";
    std::vector<Case> cases = {
        {group + "/library", [ctx](size_t m) {
           for (size_t i = 0; i < m; ++i) {
             metrale_devptr_t p = 0;
             if (!ok(metrale_alloc(ctx, kBytes, &p), "metrale_alloc")) return false;
             if (!ok(metrale_free(ctx, p), "metrale_free")) return false;
           }
           return true;
         }, nullptr},
        {group + "/malloc_free", [](size_t m) {
           for (size_t i = 0; i < m; ++i) {
             void* volatile p = std::malloc(kBytes);
             std::free(p);
           }
           return true;
         }, nullptr}};
    const size_t batch = 2000;
    for (const auto& r : run_interleaved(cases, 21, batch)) {
      Entry e;
      e.group = group;
      e.variant = r.id.substr(group.size() + 1);
      e.size_bytes = kBytes;
      e.batch = batch;
      e.timing = "one alloc followed by its free, per op, with " + std::to_string(n) +
                 " other allocations live";
      if (e.variant == "library") {
        e.side = "library";
        e.raw_ref = group + "/malloc_free";
        // The <= 100 ns target is the ledger's: bench_ledger_core measures it.
        e.note = path_note;
      } else {
        e.side = "raw";
        e.note = "libc malloc+free of the same size: the floor under the host backend's figure";
      }
      add_case(&report, r, e);
    }
  }

  if (live.size() == 1000000) {
    size_t needed = 0;
    std::vector<char> text;
    if (ok(metrale_alloc_report(ctx, 0, 0, nullptr, 0, &needed), "metrale_alloc_report (size)")) {
      text.resize(needed + 4096);
      std::vector<Case> cases = {{"ledger_report/1M_live", [&](size_t m) {
                                    for (size_t i = 0; i < m; ++i) {
                                      size_t got = 0;
                                      if (!ok(metrale_alloc_report(ctx, 0, 0, text.data(), text.size(), &got),
                                              "metrale_alloc_report"))
                                        return false;
                                    }
                                    return true;
                                  }, nullptr}};
      auto results = run_interleaved(cases, 9, 1, 1);
      Entry e;
      e.group = "ledger_report";
      e.variant = "1M_live";
      e.side = "library";
      e.batch = 1;
      e.timing = "one metrale_alloc_report call (all sites, into a buffer large enough)";
      e.note = std::to_string(kSites) + " sites, " + std::to_string(needed) + " bytes of text";
      e.target = {Target::ABS_NS, 50e6};
      add_case(&report, results[0], e);
    } else {
      report.skip("ledger_report/1M_live", metrale_last_error_message());
    }
  } else {
    report.skip("ledger_report/1M_live", "the ledger never reached 1M live allocations");
  }
  for (auto p : live) metrale_free(ctx, p);
  metrale_context_destroy(ctx);
  return report.write(out) ? 0 : 1;
}
