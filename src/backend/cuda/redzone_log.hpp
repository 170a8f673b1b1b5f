// The red-zone pass's one warning (cuda_redzone.cpp, cuda_pad_check.cpp):
// the slow path without kernels, said once and logged after the red-zone
// lock is released.
#pragma once

#include <atomic>
#include <memory>
#include <string>

#include "backend/log_sink.hpp"

namespace metrale::backend::cuda_impl {

// The fallback is decided under redzone_mutex_, but the line is logged after
// it is released: a log callback may call back into the library (an alloc
// fills a pad, which takes that mutex again on this thread).
// A plain pointer, not a std::string: the TLS stays trivially destructible,
// so a pass made from a pthread key destructor at thread exit (after the
// thread's C++ thread_local objects were destroyed) touches no dead object.
inline thread_local std::string* t_pending_line = nullptr;

inline void log_fallback_once(const std::string& why) {
  // Not std::call_once: call_once entered again on one thread deadlocks.
  static std::atomic<bool> logged{false};
  if (logged.exchange(true)) return;
  try {
    t_pending_line = new std::string(
        "red zones on cuda use the slow path (a memset per range, pads checked on the host): " +
        why);
  } catch (...) {
    // No memory for the warning: the pass goes on without it.
  }
}

// Declared before the lock_guard, so it runs after the unlock.
struct LogAfterUnlock {
  ~LogAfterUnlock() {
    std::unique_ptr<std::string> line(t_pending_line);
    if (!line) return;
    t_pending_line = nullptr;
    try {
      backend::log(METRALE_LOG_WARN, *line);
    } catch (...) {
      // Logging never fails the red-zone pass.
    }
  }
};

}  // namespace metrale::backend::cuda_impl
