// The red-zone pass's one warning (cuda_redzone.cpp, cuda_pad_check.cpp):
// the slow path without kernels, said once and logged after the red-zone
// lock is released.
#pragma once

#include <atomic>
#include <string>

#include "backend/log_sink.hpp"

namespace metrale::backend::cuda_impl {

// The fallback is decided under redzone_mutex_, but the line is logged after
// it is released: a log callback may call back into the library (an alloc
// fills a pad, which takes that mutex again on this thread).
inline thread_local std::string t_pending_line;

inline void log_fallback_once(const std::string& why) {
  // Not std::call_once: call_once entered again on one thread deadlocks.
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  t_pending_line =
      "red zones on cuda use the slow path (a memset per range, pads checked on the host): " + why;
}

// Declared before the lock_guard, so it runs after the unlock.
struct LogAfterUnlock {
  ~LogAfterUnlock() {
    if (t_pending_line.empty()) return;
    std::string line;
    line.swap(t_pending_line);
    try {
      backend::log(METRALE_LOG_WARN, line);
    } catch (...) {
      // Logging never fails the red-zone pass.
    }
  }
};

}  // namespace metrale::backend::cuda_impl
