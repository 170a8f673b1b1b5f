// The event log's cost (docs/event-log.md): metrale_alloc + metrale_free on
// a context that logs every event to a file, against the same pair on a
// context with no log open (the one-branch hook), interleaved. Sizes 256 B
// and 64 KiB, caching pool on (the default) and off; public API only.
// The log_on figure includes formatting the two lines, a pool-stats read
// each, and the writes (a 64 KiB buffer, then write(2)) to a file in
// $TMPDIR (default /tmp).
// Usage: bench_event_log [host|cuda] [OUT.json]   (either order; default host, stdout)
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "metrale_gpu.h"

using namespace bench;

namespace {

bool ok(metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return true;
  note_failure(std::string(call) + ": " + metrale_status_name(st) + ": " +
               metrale_last_error_message());
  return false;
}

Case pair_case(const std::string& id, metrale_context_t* ctx, size_t bytes) {
  return {id, [ctx, bytes](size_t m) {
            for (size_t i = 0; i < m; ++i) {
              metrale_devptr_t p = 0;
              if (!ok(metrale_alloc_at(ctx, bytes, "bench/event_log.c", 42, &p), "metrale_alloc"))
                return false;
              if (!ok(metrale_free(ctx, p), "metrale_free")) return false;
            }
            return true;
          },
          nullptr};
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_event_log");
  std::string backend = "host", out = "-";
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "host" || arg == "cuda")
      backend = arg;
    else
      out = arg;
  }
  for (const char* var : {"METRALE_BACKEND", "METRALE_REDZONE", "METRALE_CHECKED", "METRALE_POOL",
                          "METRALE_EVENT_LOG", "METRALE_QUARANTINE"})
    unsetenv(var);
  metrale_log_set_level(METRALE_LOG_WARN);
  const char* tmp = std::getenv("TMPDIR");
  const std::string log_path = std::string(tmp != nullptr && *tmp ? tmp : "/tmp") +
                               "/bench_event_log_" + std::to_string(getpid()) + ".jsonl";
  report.meta("backend", backend);
  report.meta("log_file", log_path);
  report.meta_number("hardware_threads", std::thread::hardware_concurrency());

  for (int pool : {1, 0}) {
    const std::string pool_name = pool ? "pool" : "nopool";
    metrale_context_options_t opts;
    metrale_context_options_init(&opts);
    opts.backend = backend == "cuda" ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST;
    opts.pool = pool;
    metrale_context_t* quiet = nullptr;
    metrale_context_t* logged = nullptr;
    if (!ok(metrale_context_create(&opts, &quiet), "metrale_context_create") ||
        !ok(metrale_context_create(&opts, &logged), "metrale_context_create")) {
      report.skip("event_log/" + pool_name, std::string("no ") + backend +
                                                " context: " + metrale_last_error_message());
      metrale_context_destroy(quiet);
      continue;
    }
    metrale_device_info_t info;
    if (metrale_device_info(quiet, &info) == METRALE_OK) report.meta("device_name", info.name);
    if (!ok(metrale_event_log_open(logged, log_path.c_str()), "metrale_event_log_open")) {
      report.skip("event_log/" + pool_name, metrale_last_error_message());
    } else {
      for (size_t bytes : {size_t{256}, size_t{64} << 10}) {
        const std::string size = bytes >= 1024 ? std::to_string(bytes >> 10) + "KiB"
                                               : std::to_string(bytes) + "B";
        const std::string group = "event_log_alloc_free/" + size + "/" + pool_name;
        const size_t batch = 2000;
        std::vector<Case> cases = {pair_case(group + "/log_off", quiet, bytes),
                                   pair_case(group + "/log_on", logged, bytes)};
        for (const auto& r : run_interleaved(cases, 15, batch)) {
          Entry e;
          e.group = group;
          e.variant = r.id.substr(group.size() + 1);
          e.size_bytes = static_cast<double>(bytes);
          e.batch = batch;
          e.timing = "one metrale_alloc followed by its metrale_free, per op";
          if (e.variant == "log_on") {
            e.side = "library";
            e.raw_ref = group + "/log_off";
            e.note = "event log open: two JSON lines per op (alloc, free) with pool state, "
                     "buffered, written to " + log_path;
          } else {
            e.side = "raw";
            e.note = "no event log open: the hooks' one branch only";
          }
          add_case(&report, r, e);
        }
      }
      ok(metrale_event_log_close(logged), "metrale_event_log_close");
    }
    metrale_context_destroy(logged);
    metrale_context_destroy(quiet);
  }
  std::remove(log_path.c_str());
  return report.write(out) ? 0 : 1;
}
