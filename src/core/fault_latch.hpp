// The context's sticky-fault latch: set once, by the first fault, forever.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "backend/error.hpp"

namespace metrale::core {

class FaultLatch {
 public:
  // Keeps the first message; later faults are not recorded.
  void latch(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_.load(std::memory_order_relaxed)) return;
    first_ = message;
    lost_.store(true, std::memory_order_release);
  }
  bool lost() const { return lost_.load(std::memory_order_acquire); }
  std::string first() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return first_;
  }
  // Every device-touching entry starts here.
  void check() const {
    if (lost()) [[unlikely]] refuse();
  }

 private:
  // Out of line: the message is a string built on the cold path only.
  [[noreturn, gnu::cold, gnu::noinline]] void refuse() const {
    fail(METRALE_ERROR_CONTEXT_LOST, "context lost: " + first());
  }
  std::atomic<bool> lost_{false};
  mutable std::mutex mutex_;
  std::string first_;
};

}  // namespace metrale::core
