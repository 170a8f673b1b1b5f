#include "core/bounds.hpp"

#include <string>

#include "backend/error.hpp"
#include "core/format.hpp"

namespace metrale::core {

void BoundsIndex::add(uint64_t ptr, const Region& r) {
  std::lock_guard<std::mutex> lock(mutex_);
  regions_[ptr] = r;
}

void BoundsIndex::remove(uint64_t ptr) {
  std::lock_guard<std::mutex> lock(mutex_);
  regions_.erase(ptr);
}

bool BoundsIndex::take(uint64_t ptr, Region* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = regions_.find(ptr);
  if (it == regions_.end()) return false;
  *out = it->second;
  regions_.erase(it);
  return true;
}

namespace {
std::string describe(uint64_t base, const Region& r) {
  std::string s = hex(base) + " (" + std::to_string(r.bytes) + " bytes) from " + r.file;
  if (r.line > 0) s += ":" + std::to_string(r.line);
  return s;
}
}  // namespace

void BoundsIndex::check(uint64_t ptr, size_t bytes, const char* what) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto next = regions_.upper_bound(ptr);
  // The message is built only on failure: this runs on every checked copy.
  const auto range = [&] {
    return std::string(what) + " [" + hex(ptr) + ", +" + std::to_string(bytes) + ")";
  };
  if (next != regions_.begin()) {
    auto prev = std::prev(next);
    uint64_t off = ptr - prev->first;
    if (off < prev->second.bytes && bytes <= prev->second.bytes - off) return;
    if (off < prev->second.bytes) {
      fail(METRALE_ERROR_OUT_OF_BOUNDS,
           range() + " runs " + std::to_string(bytes - (prev->second.bytes - off)) +
               " bytes past the end of the allocation " + describe(prev->first, prev->second));
    }
    uint64_t past = off - prev->second.bytes;
    bool prev_closer = next == regions_.end() || past <= next->first - ptr;
    if (prev_closer) {
      fail(METRALE_ERROR_OUT_OF_BOUNDS,
           range() + " is outside every live allocation; closest: " +
               describe(prev->first, prev->second) + ", " + std::to_string(past) +
               " bytes past its end");
    }
  }
  if (next != regions_.end()) {
    fail(METRALE_ERROR_OUT_OF_BOUNDS,
         range() + " is outside every live allocation; closest: " + describe(next->first, next->second) +
             ", " + std::to_string(next->first - ptr) + " bytes before its start");
  }
  fail(METRALE_ERROR_OUT_OF_BOUNDS, range() + " is outside every live allocation (none is live)");
}

}  // namespace metrale::core
