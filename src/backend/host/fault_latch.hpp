// The host backend's sticky device fault. A host kernel returning
// METRALE_ERROR_CONTEXT_LOST stands for an illegal address on a GPU: from
// then on the "device" refuses work, as a CUDA context does, while frees and
// destroys still succeed so that cleanup works.
#pragma once

#include <atomic>
#include <mutex>
#include <string>

#include "backend/error.hpp"

namespace metrale::backend::host {

class FaultLatch {
 public:
  // Keeps the first message; later faults do not replace it.
  void latch(const std::string& message) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (lost_.load(std::memory_order_relaxed)) return;
    message_ = message;
    lost_.store(true, std::memory_order_release);
  }

  // "" while healthy.
  std::string message() const {
    if (!lost_.load(std::memory_order_acquire)) return std::string();
    std::lock_guard<std::mutex> lock(mutex_);
    return message_;
  }

  // Throws CONTEXT_LOST with the first fault's message once latched.
  void throw_if_lost() const {
    if (!lost_.load(std::memory_order_acquire)) return;
    fail(METRALE_ERROR_CONTEXT_LOST, message());
  }

 private:
  std::atomic<bool> lost_{false};
  mutable std::mutex mutex_;
  std::string message_;
};

}  // namespace metrale::backend::host
