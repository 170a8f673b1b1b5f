#include "replayer.hpp"

#include <chrono>
#include <deque>
#include <map>
#include <unordered_map>

namespace metrale_replay {
namespace {

// "file:line" split at the last ':' (file names may hold ':').
void split_site(const std::string& site, std::string* file, int* line) {
  const size_t colon = site.rfind(':');
  *line = 0;
  *file = site.empty() ? "<replay>" : site;
  if (colon == std::string::npos || colon + 1 >= site.size()) return;
  int v = 0;
  for (size_t k = colon + 1; k < site.size(); ++k) {
    if (site[k] < '0' || site[k] > '9' || v > 100000000) return;
    v = v * 10 + (site[k] - '0');
  }
  *file = site.substr(0, colon);
  *line = v;
}

struct Live {
  metrale_devptr_t ptr;
  uint64_t bytes;
};

class Replay {
 public:
  Replay(metrale_context_t* ctx, const ReplayOptions& o, ReplayResult* r)
      : ctx_(ctx), opts_(o), r_(r) {}
  ~Replay() {
    for (auto& kv : streams_) metrale_stream_destroy(ctx_, kv.second);
  }

  void run(const std::vector<LogEvent>& events) {
    const auto start = std::chrono::steady_clock::now();
    for (const LogEvent& e : events) step(e);
    // What the log left live is freed, so the replay ends as clean as it began.
    for (auto& kv : live_) {
      for (const Live& l : kv.second) {
        ++r_->left_live;
        metrale_free(ctx_, l.ptr);
      }
    }
    r_->seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }

 private:
  void note(const LogEvent& e, const std::string& what) {
    if (r_->messages.size() < opts_.max_report) {
      r_->messages.push_back("line " + std::to_string(e.line_no) + " (seq " +
                             std::to_string(e.seq) + "): " + what);
    }
  }
  std::string describe(const LogEvent& e) const {
    return std::string(e.managed ? "managed " : "") + "alloc of " + std::to_string(e.bytes) +
           " bytes at " + (e.site.empty() ? std::string("<no site>") : e.site);
  }
  metrale_stream_t* stream(uint64_t id) {
    if (id == 0) return nullptr;
    auto it = streams_.find(id);
    if (it != streams_.end()) return it->second;
    metrale_stream_t* s = nullptr;
    if (metrale_stream_create(ctx_, &s) != METRALE_OK) s = nullptr;  // default stream then
    streams_[id] = s;
    return s;
  }
  const char* intern(const std::string& text) {
    sites_.push_back(text);
    return sites_.back().c_str();
  }
  void sample_pool() {
    metrale_pool_stats_t ps{};
    ps.struct_size = sizeof ps;
    if (metrale_pool_stats(ctx_, &ps) == METRALE_OK && ps.reserved_bytes > r_->peak_reserved_bytes)
      r_->peak_reserved_bytes = ps.reserved_bytes;
  }

  void step(const LogEvent& e) {
    switch (e.kind) {
      case LogEvent::Open:
      case LogEvent::Close:
        return;
      case LogEvent::Scan:
        ++r_->scans;
        return;
      case LogEvent::Alloc:
      case LogEvent::Oom:
        alloc(e);
        break;
      case LogEvent::Free:
        free(e);
        break;
    }
    if (e.pool_known && e.pool_reserved > r_->log_peak_reserved_bytes)
      r_->log_peak_reserved_bytes = e.pool_reserved;
    sample_pool();
  }

  void alloc(const LogEvent& e) {
    const bool logged_ok = e.kind == LogEvent::Alloc;
    if (logged_ok) {
      ++r_->allocs;
      log_live_ += e.bytes;
      if (log_live_ > r_->log_peak_live_bytes) r_->log_peak_live_bytes = log_live_;
    } else {
      ++r_->ooms_logged;
    }
    std::string file;
    int line = 0;
    split_site(e.site, &file, &line);
    metrale_devptr_t p = 0;
    metrale_status_t st;
    std::string why;
    if (opts_.limit > 0 && (e.bytes > opts_.limit || live_bytes_ > opts_.limit - e.bytes)) {
      st = METRALE_ERROR_OUT_OF_MEMORY;
      why = "over --limit " + std::to_string(opts_.limit) + " (" + std::to_string(live_bytes_) +
            " bytes live)";
    } else {
      const char* f = intern(file);
      metrale_stream_t* s = stream(e.stream);
      if (e.managed) st = metrale_alloc_managed_at(ctx_, e.bytes, f, line, &p);
      else if (s != nullptr) st = metrale_alloc_async_at(ctx_, e.bytes, s, f, line, &p);
      else st = metrale_alloc_at(ctx_, e.bytes, f, line, &p);
      if (st != METRALE_OK) why = metrale_last_error_message();
    }
    if (st != METRALE_OK) {
      if (logged_ok) {
        ++r_->replay_failures;
        ++r_->divergences;
        note(e, describe(e) + " succeeded in the log, failed in the replay: " +
                    metrale_status_name(st) + ": " + why);
      }
      return;
    }
    if (!logged_ok) {
      ++r_->divergences;
      note(e, describe(e) + " failed (out of memory) in the log, succeeded in the replay");
      metrale_free(ctx_, p);  // the log has no free for it
      return;
    }
    live_[e.ptr].push_back({p, e.bytes});
    live_bytes_ += e.bytes;
    if (live_bytes_ > r_->peak_live_bytes) r_->peak_live_bytes = live_bytes_;
  }

  void free(const LogEvent& e) {
    ++r_->frees;
    log_live_ = log_live_ >= e.bytes ? log_live_ - e.bytes : 0;
    auto it = live_.find(e.ptr);
    if (it == live_.end() || it->second.empty()) {
      // Allocated before the log began, or failed in the replay (counted there).
      ++r_->unmatched_frees;
      return;
    }
    // The oldest allocation at that address: seq order makes it the one freed.
    const Live l = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) live_.erase(it);
    live_bytes_ -= l.bytes;
    metrale_stream_t* s = stream(e.stream);
    const metrale_status_t st =
        s != nullptr ? metrale_free_async(ctx_, l.ptr, s) : metrale_free(ctx_, l.ptr);
    if (st != METRALE_OK) {
      ++r_->replay_failures;
      ++r_->divergences;
      note(e, "free of the " + std::to_string(e.bytes) + "-byte allocation from " + e.site +
                  " succeeded in the log, failed in the replay: " + metrale_status_name(st) +
                  ": " + metrale_last_error_message());
    }
  }

  metrale_context_t* ctx_;
  const ReplayOptions& opts_;
  ReplayResult* r_;
  std::unordered_map<uint64_t, std::deque<Live>> live_;  // logged ptr -> replay's, oldest first
  std::map<uint64_t, metrale_stream_t*> streams_;
  std::deque<std::string> sites_;  // file names handed to metrale_alloc_at live here
  uint64_t live_bytes_ = 0;
  uint64_t log_live_ = 0;
};

}  // namespace

bool replay_context(const std::vector<LogEvent>& events, const ReplayOptions& opts,
                    ReplayResult* out, std::string* error) {
  for (const LogEvent& e : events) {
    if (e.kind == LogEvent::Open) {
      out->logged_backend = e.backend;
      out->logged_pool = e.pool_on;
      break;
    }
  }
  metrale_context_options_t o;
  metrale_context_options_init(&o);
  o.backend = opts.backend;
  if (opts.pool >= 0) o.pool = opts.pool;
  metrale_context_t* ctx = nullptr;
  if (metrale_context_create(&o, &ctx) != METRALE_OK) {
    *error = std::string("cannot create a context: ") + metrale_last_error_message();
    return false;
  }
  out->backend = metrale_context_backend(ctx) == METRALE_BACKEND_CUDA ? "cuda" : "host";
  metrale_pool_stats_t ps{};
  ps.struct_size = sizeof ps;
  out->pool = metrale_pool_stats(ctx, &ps) == METRALE_OK && ps.enabled != 0;
  {
    Replay r(ctx, opts, out);
    r.run(events);
  }
  metrale_context_destroy(ctx);
  return true;
}

}  // namespace metrale_replay
