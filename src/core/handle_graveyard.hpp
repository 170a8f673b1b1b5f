// Backend handles the caller destroyed that the backend has not yet: the
// newest `keep` of a kind wait here (backend_release.cpp and modules.cpp
// say why).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>
#include <vector>

namespace metrale::core {

class HandleGraveyard {
 public:
  // Rule 2's window: a destroyed slot is reused after 64 later deaths.
  static constexpr size_t kKeep = 64;

  explicit HandleGraveyard(size_t keep = kKeep) : keep_(keep) {}

  // False when there is no memory to keep h: the caller destroys it now.
  bool bury(uint64_t h) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    try {
      dead_.push_back(h);
    } catch (const std::bad_alloc&) {
      return false;
    }
    return true;
  }

  // The oldest handle past the newest `keep`, taken out; false when none.
  bool take_overdue(uint64_t* h) noexcept {
    std::lock_guard<std::mutex> lock(mutex_);
    if (dead_.size() <= keep_) return false;
    *h = dead_.front();
    dead_.pop_front();
    return true;
  }

  // Every handle, taken out (teardown).
  std::vector<uint64_t> take_all() {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<uint64_t> all(dead_.begin(), dead_.end());
    dead_.clear();
    return all;
  }

 private:
  const size_t keep_;
  std::mutex mutex_;
  std::deque<uint64_t> dead_;
};

}  // namespace metrale::core
