// The library's own cost per launch, where no driver is there to compare
// with: metrale_launch of an empty host kernel on the host backend, one
// thread and several at once (each on its own stream). Everything but the
// host backend's call of the kernel is the code a cuda launch runs too
// (handle checks, the launch count), so a change there shows here first;
// the goal (issue 10: launch <= raw + 50 ns) is measured by bench_launch on
// a GPU only. Public API only.
// Usage: bench_launch_host [OUT.json]   (default stdout)
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "metrale_gpu.h"

using namespace bench;

namespace {

metrale_status_t empty_kernel(const metrale_host_kernel_call_t*, void*) { return METRALE_OK; }

bool ok(metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return true;
  note_failure(std::string(call) + ": " + metrale_status_name(st) + ": " +
               metrale_last_error_message());
  return false;
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_launch_host");
  const std::string out = output_path(argc, argv);
  for (const char* var : {"METRALE_BACKEND", "METRALE_DEBUG_SYNC", "METRALE_KERNEL_TIMING",
                          "METRALE_TRACE"})
    unsetenv(var);
  metrale_log_set_level(METRALE_LOG_WARN);
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = METRALE_BACKEND_HOST;
  metrale_context_t* ctx = nullptr;
  metrale_kernel_t* k = nullptr;
  if (!ok(metrale_context_create(&opts, &ctx), "metrale_context_create") ||
      !ok(metrale_module_register_host(ctx, "bench", "empty", empty_kernel, nullptr),
          "metrale_module_register_host") ||
      !ok(metrale_kernel_get(ctx, "bench", "empty", &k), "metrale_kernel_get")) {
    report.skip("launch_host", metrale_last_error_message());
    metrale_context_destroy(ctx);
    return report.write(out) ? 0 : 1;
  }
  report.meta("backend", "host");
  const unsigned hw = std::thread::hardware_concurrency();
  report.meta_number("hardware_threads", hw);
  const metrale_dim3_t one = {1, 1, 1};
  const unsigned max_threads = hw < 2 ? 2 : hw;
  std::vector<metrale_stream_t*> streams(max_threads, nullptr);
  for (auto& s : streams) ok(metrale_stream_create(ctx, &s), "metrale_stream_create");

  // Each thread launches m times on its own stream; the time is wall time
  // over all launches (threads x m), as bench_pool_threads reports.
  auto launches = [&](unsigned threads) {
    return [&, threads](size_t m) {
      std::vector<std::thread> pool;
      std::vector<int> good(threads, 1);
      for (unsigned t = 0; t < threads; ++t) {
        pool.emplace_back([&, t] {
          for (size_t i = 0; i < m / threads; ++i) {
            if (metrale_launch(ctx, k, one, one, 0, streams[t], nullptr) != METRALE_OK) {
              good[t] = 0;
              return;
            }
          }
        });
      }
      for (auto& th : pool) th.join();
      for (int g : good)
        if (!g) return ok(METRALE_ERROR_INTERNAL, "metrale_launch");
      return true;
    };
  };
  const size_t batch = 200000;
  std::vector<Case> cases = {
      {"launch_empty_host/library", [&](size_t m) {
         for (size_t i = 0; i < m; ++i)
           if (!ok(metrale_launch(ctx, k, one, one, 0, streams[0], nullptr), "metrale_launch"))
             return false;
         return true;
       }, nullptr},
      {"launch_empty_host/library_threads" + std::to_string(max_threads), launches(max_threads),
       nullptr}};
  for (const auto& r : run_interleaved(cases, 15, batch)) {
    Entry e;
    e.group = "launch_empty_host";
    e.variant = r.id.substr(e.group.size() + 1);
    e.side = "library";
    e.batch = batch;
    e.timing = "metrale_launch of an empty host kernel, per launch (threads: wall time / launches)";
    e.note = "host backend: no raw driver to compare with; bench_launch measures the goal on a GPU";
    add_case(&report, r, e);
  }
  for (auto* s : streams) metrale_stream_destroy(ctx, s);
  metrale_context_destroy(ctx);
  return report.write(out) ? 0 : 1;
}
