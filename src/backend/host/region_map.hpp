// Every byte range the host backend handed out or was asked to treat as
// device-visible. A GPU driver refuses (or faults on) an address outside its
// allocations; on the host such an address would be a wild write into the
// process, so every device range is checked against this map first.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <map>
#include <shared_mutex>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace metrale::backend::host {

enum class RegionKind { Device, Managed, Pinned, Registered };

const char* region_kind_name(RegionKind kind);

struct Region {
  uintptr_t base;
  size_t bytes;
  RegionKind kind;
};

// A device range to check: [ptr, ptr + bytes).
using CheckedRange = metrale::backend::Range;

class RegionMap {
 public:
  // Adds a region that this backend just allocated. Registered regions it
  // overlaps are stale (their memory was freed and reused by the allocator
  // without host_unregister) and are dropped; overlapping an owned region is
  // an internal error.
  void add_owned(uintptr_t base, size_t bytes, RegionKind kind);
  // Adds the caller's memory; INVALID_ARGUMENT when it overlaps any region.
  void add_registered(uintptr_t base, size_t bytes);
  // Removes the region starting exactly at base if its kind is one of
  // `kinds`; returns false (and removes nothing) otherwise.
  bool remove(uintptr_t base, std::initializer_list<RegionKind> kinds);
  // The region holding ptr, if any.
  bool find(uintptr_t ptr, Region* out) const;

  // Throws INVALID_ARGUMENT unless each non-empty range lies inside one region.
  void check(std::initializer_list<CheckedRange> ranges) const;
  void check(const CheckedRange* ranges, size_t n) const;

  // Checks the ranges and runs fn while holding the map shared, so that no
  // region named can be freed under fn's feet.
  template <typename Fn>
  void access(std::initializer_list<CheckedRange> ranges, Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    for (const CheckedRange& r : ranges) check_locked(r);
    fn();
  }
  template <typename Fn>
  void access(const CheckedRange* ranges, size_t n, Fn&& fn) const {
    std::shared_lock<std::shared_mutex> lock(mutex_);
    check_all_locked(ranges, n);
    fn();
  }

  size_t size() const;
  // Empties the map; returns the bases of the regions this backend
  // allocated (not the registered ones), for teardown.
  std::vector<uintptr_t> drain_owned();

 private:
  void check_locked(const CheckedRange& r) const;
  // check_locked over an array; a range inside the region the one before
  // it hit needs no map lookup (a batch of pads mostly lies in few chunks).
  void check_all_locked(const CheckedRange* ranges, size_t n) const;
  // The region whose span holds ptr; end() when none.
  std::map<uintptr_t, Region>::const_iterator holding_locked(uintptr_t ptr) const;
  bool overlaps_locked(uintptr_t base, size_t bytes, const Region** hit) const;

  mutable std::shared_mutex mutex_;
  std::map<uintptr_t, Region> regions_;  // keyed by base
};

// "[0x1000, +64)"
std::string describe_range(uintptr_t ptr, size_t bytes);
// "0x1000"
std::string describe_address(uintptr_t ptr);

}  // namespace metrale::backend::host
