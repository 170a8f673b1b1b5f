#include "backend/host/region_map.hpp"

#include <cinttypes>
#include <cstdio>
#include <iterator>
#include <mutex>

#include "backend/error.hpp"

namespace metrale::backend::host {

const char* region_kind_name(RegionKind kind) {
  switch (kind) {
    case RegionKind::Device:
      return "device";
    case RegionKind::Managed:
      return "managed";
    case RegionKind::Pinned:
      return "pinned host";
    case RegionKind::Registered:
      return "registered host";
  }
  return "unknown";
}

std::string describe_range(uintptr_t ptr, size_t bytes) {
  char text[64];
  std::snprintf(text, sizeof text, "[0x%" PRIxPTR ", +%zu)", ptr, bytes);
  return text;
}

std::string describe_address(uintptr_t ptr) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIxPTR, ptr);
  return text;
}

std::map<uintptr_t, Region>::const_iterator RegionMap::holding_locked(uintptr_t ptr) const {
  auto it = regions_.upper_bound(ptr);
  if (it == regions_.begin()) return regions_.end();
  --it;
  const Region& r = it->second;
  if (ptr - r.base < r.bytes) return it;
  return regions_.end();
}

bool RegionMap::overlaps_locked(uintptr_t base, size_t bytes, const Region** hit) const {
  // A region starting before base reaches into it, or one starts inside it.
  auto it = regions_.upper_bound(base);
  if (it != regions_.begin()) {
    auto prev = std::prev(it);
    if (base - prev->second.base < prev->second.bytes) {
      *hit = &prev->second;
      return true;
    }
  }
  if (it != regions_.end() && it->first - base < bytes) {
    *hit = &it->second;
    return true;
  }
  return false;
}

void RegionMap::add_owned(uintptr_t base, size_t bytes, RegionKind kind) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const Region* hit = nullptr;
  while (overlaps_locked(base, bytes, &hit)) {
    if (hit->kind != RegionKind::Registered) {
      fail(METRALE_ERROR_INTERNAL, "host backend: new " + std::string(region_kind_name(kind)) +
                                       " memory " + describe_range(base, bytes) +
                                       " overlaps live " + region_kind_name(hit->kind) +
                                       " memory " + describe_range(hit->base, hit->bytes));
    }
    const uintptr_t stale = hit->base;
    regions_.erase(stale);
  }
  regions_.emplace(base, Region{base, bytes, kind});
}

void RegionMap::add_registered(uintptr_t base, size_t bytes) {
  if (bytes > UINTPTR_MAX - base) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: host_register range " +
                                             describe_range(base, bytes) +
                                             " wraps around the address space");
  }
  std::unique_lock<std::shared_mutex> lock(mutex_);
  const Region* hit = nullptr;
  if (overlaps_locked(base, bytes, &hit)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: host_register range " + describe_range(base, bytes) + " overlaps " +
             region_kind_name(hit->kind) + " memory " + describe_range(hit->base, hit->bytes));
  }
  regions_.emplace(base, Region{base, bytes, RegionKind::Registered});
}

bool RegionMap::remove(uintptr_t base, std::initializer_list<RegionKind> kinds) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = regions_.find(base);
  if (it == regions_.end()) return false;
  for (RegionKind k : kinds) {
    if (it->second.kind == k) {
      regions_.erase(it);
      return true;
    }
  }
  return false;
}

bool RegionMap::find(uintptr_t ptr, Region* out) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = holding_locked(ptr);
  if (it == regions_.end()) return false;
  *out = it->second;
  return true;
}

void RegionMap::check_locked(const CheckedRange& range) const {
  if (range.bytes == 0) return;
  auto it = holding_locked(range.ptr);
  if (it != regions_.end()) {
    const Region& r = it->second;
    if (range.bytes <= r.bytes - (range.ptr - r.base)) return;
  }
  fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: " + describe_range(range.ptr, range.bytes) +
                                           " is not inside memory this backend allocated");
}

void RegionMap::check(std::initializer_list<CheckedRange> ranges) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  for (const CheckedRange& r : ranges) check_locked(r);
}

void RegionMap::check(const CheckedRange* ranges, size_t n) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  check_all_locked(ranges, n);
}

void RegionMap::check_all_locked(const CheckedRange* ranges, size_t n) const {
  // The region the range before hit, in locals: [base, base + span). An
  // empty span (none yet) holds no range, so the first one looks it up.
  uintptr_t base = 0;
  size_t span = 0;
  for (size_t i = 0; i < n; ++i) {
    const CheckedRange& range = ranges[i];
    const size_t at = range.ptr - base;
    if (range.bytes == 0 || (at < span && range.bytes <= span - at)) continue;
    auto it = holding_locked(range.ptr);
    if (it == regions_.end() || range.bytes > it->second.bytes - (range.ptr - it->second.base)) {
      check_locked(range);  // throws, naming the range
    }
    base = it->second.base;
    span = it->second.bytes;
  }
}

size_t RegionMap::size() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return regions_.size();
}

std::vector<uintptr_t> RegionMap::drain_owned() {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  std::vector<uintptr_t> owned;
  for (const auto& entry : regions_) {
    if (entry.second.kind != RegionKind::Registered) owned.push_back(entry.first);
  }
  regions_.clear();
  return owned;
}

}  // namespace metrale::backend::host
