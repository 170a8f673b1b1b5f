#include "backend/host/process_pins.hpp"

namespace metrale::backend::host {

ProcessPins& ProcessPins::instance() {
  // Never destroyed: a context may be torn down from an atexit handler.
  static ProcessPins* pins = new ProcessPins();
  return *pins;
}

void ProcessPins::add(uintptr_t base, size_t bytes, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  ranges_.emplace(base, Entry{bytes, owner});
}

bool ProcessPins::add_if_free(uintptr_t base, size_t bytes, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = ranges_.begin(); it != ranges_.end() && it->first < base + bytes; ++it) {
    if (it->first + it->second.bytes > base) return false;
  }
  ranges_.emplace(base, Entry{bytes, owner});
  return true;
}

void ProcessPins::remove(uintptr_t base, const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto [lo, hi] = ranges_.equal_range(base);
  for (auto it = lo; it != hi; ++it) {
    if (it->second.owner == owner) {
      ranges_.erase(it);
      return;
    }
  }
}

void ProcessPins::remove_owner(const void* owner) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = ranges_.begin(); it != ranges_.end();) {
    it = it->second.owner == owner ? ranges_.erase(it) : std::next(it);
  }
}

void ProcessPins::drop_overlapping(uintptr_t base, size_t bytes) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto it = ranges_.begin(); it != ranges_.end() && it->first < base + bytes;) {
    const bool overlaps = it->first + it->second.bytes > base;
    it = overlaps ? ranges_.erase(it) : std::next(it);
  }
}

bool ProcessPins::covers(uintptr_t p, size_t bytes) const {
  if (bytes == 0 || p + bytes < p) return false;
  const uintptr_t end = p + bytes;
  uintptr_t covered = p;  // [p, covered) is known pinned
  std::lock_guard<std::mutex> lock(mutex_);
  // In base order, a range starting at or before `covered` extends it; the
  // first one starting after it leaves a hole. Few ranges are pinned at a
  // time, so a walk from the start is cheap.
  for (auto it = ranges_.begin(); it != ranges_.end() && it->first <= covered; ++it) {
    const uintptr_t range_end = it->first + it->second.bytes;
    if (range_end > covered) covered = range_end;
    if (covered >= end) return true;
  }
  return false;
}

}  // namespace metrale::backend::host
