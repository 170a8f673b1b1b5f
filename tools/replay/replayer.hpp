// Replays the events of one logged context against a fresh context of this
// library: each logged alloc (and out-of-memory failure) is made again with
// its size, kind, stream and site, each logged free frees what the replay
// got for that pointer, and outcomes are compared with the log.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "event_reader.hpp"
#include "metrale_gpu.h"

namespace metrale_replay {

struct ReplayOptions {
  metrale_backend_t backend = METRALE_BACKEND_AUTO;
  int pool = -1;        // -1: the library's default (METRALE_POOL), 0 off, 1 on
  uint64_t limit = 0;   // > 0: an alloc that would take live bytes past it fails
  size_t max_report = 20;  // divergences listed (all are counted)
};

struct ReplayResult {
  uint64_t ctx = 0;
  std::string logged_backend;  // from the open line ("" when there was none)
  bool logged_pool = false;
  std::string backend;         // what the replay ran on
  bool pool = false;
  uint64_t allocs = 0, frees = 0, ooms_logged = 0, scans = 0;
  uint64_t replay_failures = 0;   // allocs and frees that failed in the replay
  uint64_t divergences = 0;       // outcomes that differ from the log
  uint64_t unmatched_frees = 0;   // frees of pointers allocated before the log began
  uint64_t left_live = 0;         // live at the log's end (freed by the replay)
  uint64_t peak_live_bytes = 0;   // replay: bytes asked, live at once
  uint64_t peak_reserved_bytes = 0;  // replay: pool's reserved bytes (0 without pool)
  uint64_t log_peak_live_bytes = 0;  // the log's own figures, for comparison
  uint64_t log_peak_reserved_bytes = 0;
  double seconds = 0;             // wall time of the replayed calls
  std::vector<std::string> messages;  // the first max_report divergences and failures
};

// Replays events (one context's, sorted by seq). false with *error when no
// context can be created (nothing replayed).
bool replay_context(const std::vector<LogEvent>& events, const ReplayOptions& opts,
                    ReplayResult* out, std::string* error);

}  // namespace metrale_replay
