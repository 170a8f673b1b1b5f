// metrale-replay: replays an event log (docs/event-log.md) against this
// library on either backend and either pool setting; reports peak bytes,
// time and failures; exits 1 when the replay diverges from the log (an
// allocation that failed where the log says it succeeded, or the reverse).
//
// Usage: metrale-replay [--backend auto|host|cuda] [--pool on|off]
//                       [--limit BYTES] [--json] LOG
// Exit: 0 replayed clean, 1 diverged, 2 bad arguments, unreadable log or
// no context.
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include "event_reader.hpp"
#include "replayer.hpp"

using namespace metrale_replay;

namespace {

int usage(const char* why) {
  std::fprintf(stderr,
               "metrale-replay: %s\n"
               "usage: metrale-replay [--backend auto|host|cuda] [--pool on|off] "
               "[--limit BYTES] [--json] LOG\n"
               "  --backend  backend to replay on (default: auto, or METRALE_BACKEND)\n"
               "  --pool     caching pool on or off (default: the library's, METRALE_POOL)\n"
               "  --limit    fail an allocation that would hold more than BYTES live\n"
               "  --json     print the summary as one JSON object per context\n"
               "exit status: 0 clean, 1 diverged, 2 usage or unreadable log\n",
               why);
  return 2;
}

bool parse_bytes(const char* text, uint64_t* out) {
  if (*text == '\0') return false;
  uint64_t v = 0;
  for (const char* c = text; *c != '\0'; ++c) {
    if (*c < '0' || *c > '9') return false;
    const uint64_t d = static_cast<uint64_t>(*c - '0');
    if (v > (UINT64_MAX - d) / 10) return false;
    v = v * 10 + d;
  }
  *out = v;
  return true;
}

std::string json_str(const std::string& s) {
  std::string o = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      o += '\\';
      o += static_cast<char>(c);
    } else if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      o += buf;
    } else {
      o += static_cast<char>(c);
    }
  }
  return o + "\"";
}

void print_text(const ReplayResult& r) {
  std::printf("context 0x%llx: logged on %s (pool %s), replayed on %s (pool %s)\n",
              static_cast<unsigned long long>(r.ctx),
              r.logged_backend.empty() ? "?" : r.logged_backend.c_str(),
              r.logged_pool ? "on" : "off", r.backend.c_str(), r.pool ? "on" : "off");
  std::printf("  events: %llu allocs, %llu frees, %llu logged out-of-memory, %llu scans\n",
              static_cast<unsigned long long>(r.allocs), static_cast<unsigned long long>(r.frees),
              static_cast<unsigned long long>(r.ooms_logged),
              static_cast<unsigned long long>(r.scans));
  std::printf("  peak live bytes: %llu replayed, %llu logged\n",
              static_cast<unsigned long long>(r.peak_live_bytes),
              static_cast<unsigned long long>(r.log_peak_live_bytes));
  std::printf("  peak pool reserved bytes: %llu replayed, %llu logged\n",
              static_cast<unsigned long long>(r.peak_reserved_bytes),
              static_cast<unsigned long long>(r.log_peak_reserved_bytes));
  std::printf("  time: %.6f s; replay failures: %llu; divergences: %llu; "
              "frees of pointers from before the log: %llu; live at the end: %llu\n",
              r.seconds, static_cast<unsigned long long>(r.replay_failures),
              static_cast<unsigned long long>(r.divergences),
              static_cast<unsigned long long>(r.unmatched_frees),
              static_cast<unsigned long long>(r.left_live));
  for (const std::string& m : r.messages) std::printf("  diverged: %s\n", m.c_str());
  if (r.divergences > r.messages.size()) {
    std::printf("  (%llu more not listed)\n",
                static_cast<unsigned long long>(r.divergences - r.messages.size()));
  }
}

void print_json(const ReplayResult& r) {
  std::printf("{\"ctx\":\"0x%llx\",\"logged_backend\":%s,\"logged_pool\":%s,\"backend\":%s,"
              "\"pool\":%s,\"allocs\":%llu,\"frees\":%llu,\"ooms_logged\":%llu,\"scans\":%llu,"
              "\"replay_failures\":%llu,\"divergences\":%llu,\"unmatched_frees\":%llu,"
              "\"left_live\":%llu,\"peak_live_bytes\":%llu,\"log_peak_live_bytes\":%llu,"
              "\"peak_reserved_bytes\":%llu,\"log_peak_reserved_bytes\":%llu,\"seconds\":%.9f,"
              "\"messages\":[",
              static_cast<unsigned long long>(r.ctx), json_str(r.logged_backend).c_str(),
              r.logged_pool ? "true" : "false", json_str(r.backend).c_str(),
              r.pool ? "true" : "false", static_cast<unsigned long long>(r.allocs),
              static_cast<unsigned long long>(r.frees),
              static_cast<unsigned long long>(r.ooms_logged),
              static_cast<unsigned long long>(r.scans),
              static_cast<unsigned long long>(r.replay_failures),
              static_cast<unsigned long long>(r.divergences),
              static_cast<unsigned long long>(r.unmatched_frees),
              static_cast<unsigned long long>(r.left_live),
              static_cast<unsigned long long>(r.peak_live_bytes),
              static_cast<unsigned long long>(r.log_peak_live_bytes),
              static_cast<unsigned long long>(r.peak_reserved_bytes),
              static_cast<unsigned long long>(r.log_peak_reserved_bytes), r.seconds);
  for (size_t k = 0; k < r.messages.size(); ++k) {
    std::printf("%s%s", k > 0 ? "," : "", json_str(r.messages[k]).c_str());
  }
  std::printf("]}\n");
}

}  // namespace

int main(int argc, char** argv) {
  ReplayOptions opts;
  bool json = false;
  const char* path = nullptr;
  for (int k = 1; k < argc; ++k) {
    const std::string a = argv[k];
    const bool has_value = k + 1 < argc;
    if (a == "--backend" && has_value) {
      const std::string v = argv[++k];
      if (v == "auto") opts.backend = METRALE_BACKEND_AUTO;
      else if (v == "host") opts.backend = METRALE_BACKEND_HOST;
      else if (v == "cuda") opts.backend = METRALE_BACKEND_CUDA;
      else return usage(("--backend " + v + ": expected auto, host or cuda").c_str());
      unsetenv("METRALE_BACKEND");  // the flag wins over the library's variable
    } else if (a == "--pool" && has_value) {
      const std::string v = argv[++k];
      if (v == "on") opts.pool = 1;
      else if (v == "off") opts.pool = 0;
      else return usage(("--pool " + v + ": expected on or off").c_str());
      unsetenv("METRALE_POOL");
    } else if (a == "--limit" && has_value) {
      if (!parse_bytes(argv[++k], &opts.limit) || opts.limit == 0)
        return usage("--limit: expected a positive number of bytes");
    } else if (a == "--json") {
      json = true;
    } else if (a == "-h" || a == "--help") {
      usage("replays an event log");
      return 0;
    } else if (!a.empty() && a[0] == '-') {
      return usage(("unknown or incomplete option " + a).c_str());
    } else if (path == nullptr) {
      path = argv[k];
    } else {
      return usage("more than one log given");
    }
  }
  if (path == nullptr) return usage("no log given");
  // The replay must not log itself (over the log it reads, at worst).
  unsetenv("METRALE_EVENT_LOG");
  metrale_log_set_level(METRALE_LOG_ERROR);

  std::vector<LogEvent> events;
  std::string error;
  if (!read_event_log(path, &events, &error)) {
    std::fprintf(stderr, "metrale-replay: %s\n", error.c_str());
    return 2;
  }
  std::map<uint64_t, std::vector<LogEvent>> by_ctx;
  for (LogEvent& e : events) by_ctx[e.ctx].push_back(std::move(e));
  if (by_ctx.empty()) {
    std::fprintf(stderr, "metrale-replay: %s holds no events\n", path);
    return 2;
  }
  uint64_t diverged = 0;
  for (const auto& kv : by_ctx) {
    ReplayResult r;
    r.ctx = kv.first;
    if (!replay_context(kv.second, opts, &r, &error)) {
      std::fprintf(stderr, "metrale-replay: %s\n", error.c_str());
      return 2;
    }
    diverged += r.divergences;
    if (json) print_json(r);
    else print_text(r);
  }
  if (!json) std::printf("%s\n", diverged == 0 ? "replay: clean" : "replay: DIVERGED");
  return diverged == 0 ? 0 : 1;
}
