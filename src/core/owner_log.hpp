// METRALE_REDZONE_REUSE (core/pad_reuse.cpp): the earlier owners of the
// reused blocks whose pad check is queued, copied here when the check is
// queued (the block goes back to the pool before the check's result is
// read, and its own record serves its next owners). A ring: a report reads
// its owners back unless kEntries owners were logged since, and then says
// only how many there were. No allocation per check.
//
// Not thread-safe: the context guards it with the ledger's lock.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/pool/pad_owners.hpp"

namespace metrale::core {

class OwnerLog {
 public:
  using Owner = pool::PadOwners::Owner;
  static constexpr size_t kEntries = 1 << 16;

  // Makes the ring (at context create: append never allocates).
  void reserve() { ring_.resize(kEntries); }
  // Logs o[0..n); returns where they start.
  uint64_t append(const Owner* o, uint32_t n) {
    const uint64_t at = next_;
    for (uint32_t i = 0; i < n; ++i) ring_[(at + i) % kEntries] = o[i];
    next_ += n;
    return at;
  }
  // Copies the n owners logged at `at` to out; false when overwritten since.
  bool read(uint64_t at, uint32_t n, Owner* out) const {
    if (ring_.empty() || next_ - at > kEntries || n > next_ - at) return false;
    for (uint32_t i = 0; i < n; ++i) out[i] = ring_[(at + i) % kEntries];
    return true;
  }

 private:
  std::vector<Owner> ring_;
  uint64_t next_ = 0;
};

}  // namespace metrale::core
