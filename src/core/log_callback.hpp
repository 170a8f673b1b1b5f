// The user's log callback and the calls of it in flight. No library mutex is
// held while the callback runs, so it may call back into the library; a
// line that a library call makes from inside the callback, on the same
// thread, goes to stderr instead of recursing into the callback. Replacing
// the callback waits until no other thread still runs the old one, so the
// caller may free what the old `user` pointed to as soon as set() returns.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>

#include "metrale_gpu.h"

namespace metrale::core {

class LogCallbackGate {
 public:
  // Calls the callback with the line and returns true; false (the caller
  // writes the line to stderr) when none is set or when this thread is
  // already inside the callback.
  bool deliver(metrale_log_level_t level, const char* text);

  // Installs fn/user (fn NULL: none) and returns once every call of an
  // earlier callback has returned. From inside the callback it would wait
  // for its own caller: INVALID_ARGUMENT, nothing changed.
  void set(metrale_log_fn fn, void* user);

  // Whether this thread is running the log callback right now.
  static bool inside_callback();

 private:
  std::mutex mutex_;
  std::condition_variable drained_;
  metrale_log_fn fn_ = nullptr;  // under mutex_
  void* user_ = nullptr;         // under mutex_
  uint64_t generation_ = 0;      // under mutex_; bumped by every set()
  // Calls in flight by the generation they started with; under mutex_.
  std::map<uint64_t, size_t> running_;
};

}  // namespace metrale::core
