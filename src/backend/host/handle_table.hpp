// Live handles of one kind (streams, events, graphs), each naming a shared
// object. Handles are numbers from one counter shared by every table of a
// backend, so a stream handle never equals an event handle and a destroyed
// handle is never reused: a stale or mixed-up handle is refused, not
// dereferenced. Holders keep the object alive past its destroy (a capture
// still replaying, a thread still running an op on a destroyed stream).
#pragma once

#include <atomic>
#include <cinttypes>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/error.hpp"

namespace metrale::backend::host {

class HandleCounter {
 public:
  // Away from 0 (never a handle) and from small integers a caller may pass
  // by mistake.
  static constexpr uint64_t kFirst = 0x1000;
  uint64_t next() { return next_.fetch_add(1, std::memory_order_relaxed); }
  // Whether this counter gave out `handle` (live or destroyed since).
  bool issued(uint64_t handle) const {
    return handle >= kFirst && handle < next_.load(std::memory_order_relaxed);
  }

 private:
  std::atomic<uint64_t> next_{kFirst};
};

template <typename T>
class HandleTable {
 public:
  HandleTable(const char* what, HandleCounter* counter) : what_(what), counter_(counter) {}

  uint64_t add(std::shared_ptr<T> object) {
    const uint64_t handle = counter_->next();
    std::unique_lock<std::shared_mutex> lock(mutex_);
    live_.emplace(handle, std::move(object));
    return handle;
  }

  // Throws INVALID_ARGUMENT for an unknown or destroyed handle.
  std::shared_ptr<T> get(uint64_t handle) const {
    {
      std::shared_lock<std::shared_mutex> lock(mutex_);
      auto it = live_.find(handle);
      if (it != live_.end()) return it->second;
    }
    refuse(handle);
  }

  // Removes the handle and returns its object; throws as get() does.
  std::shared_ptr<T> take(uint64_t handle) {
    {
      std::unique_lock<std::shared_mutex> lock(mutex_);
      auto it = live_.find(handle);
      if (it != live_.end()) {
        std::shared_ptr<T> object = std::move(it->second);
        live_.erase(it);
        return object;
      }
    }
    refuse(handle);
  }

  size_t live_count() const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    return live_.size();
  }

  // Calls fn(object) for every live object, under the table's shared lock
  // (fn must not add or destroy handles). Allocates nothing.
  template <typename Fn>
  void for_each(Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    for (const auto& entry : live_) fn(*entry.second);
  }

  // Every live object, for teardown.
  std::vector<std::shared_ptr<T>> drain() {
    std::unique_lock<std::shared_mutex> lock(mutex_);
    std::vector<std::shared_ptr<T>> out;
    out.reserve(live_.size());
    for (auto& entry : live_) out.push_back(std::move(entry.second));
    live_.clear();
    return out;
  }

 private:
  [[noreturn]] void refuse(uint64_t handle) const {
    char text[160];
    std::snprintf(text, sizeof text,
                  "host backend: %s handle 0x%" PRIx64 " is unknown or already destroyed", what_,
                  handle);
    // One this backend gave out and destroyed since: the cuda backend would
    // hand the driver a dead CUstream or CUevent here, which is undefined (it
    // crashed in cuStreamIsCapturing once), so the core must never pass one.
    // Race tests set METRALE_HOST_DEAD_HANDLE_ABORT=1 to make it fatal here
    // too, where the host backend would otherwise refuse it quietly.
    if (counter_->issued(handle)) {
      const char* strict = std::getenv("METRALE_HOST_DEAD_HANDLE_ABORT");
      if (strict != nullptr && strict[0] == '1') {
        std::fprintf(stderr, "%s (METRALE_HOST_DEAD_HANDLE_ABORT=1)\n", text);
        std::abort();
      }
    }
    fail(METRALE_ERROR_INVALID_ARGUMENT, text);
  }

  const char* what_;
  HandleCounter* counter_;
  mutable std::shared_mutex mutex_;
  std::unordered_map<uint64_t, std::shared_ptr<T>> live_;
};

}  // namespace metrale::backend::host
