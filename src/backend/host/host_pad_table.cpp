// The red-zone scan's pad table on the host backend: kept between calls like
// cuda's device-side table (cuda_redzone_table.cpp), taking only the slots
// the caller lists as changed. Nothing here is faster than counting the
// caller's table; it is here so that the host suites exercise core's change
// tracking: a change left out of the list leaves a stale range here, and the
// scan misses the pad exactly as it would on cuda.
#include "backend/host/host_backend.hpp"

namespace metrale::backend::host {

void HostBackend::pattern_count_table(const Range* table, size_t n, const uint32_t* changed,
                                      size_t nchanged, bool whole, uint8_t byte,
                                      std::vector<PadHit>* hits) {
  fault_.throw_if_lost();
  if (n == 0) return;
  const bool was_valid = pad_table_valid_;
  pad_table_valid_ = false;  // until this call returns
  if (whole || !was_valid) {
    pad_table_.assign(table, table + n);
  } else {
    // Slots past the old size that nobody listed keep a 0-byte range: a
    // growth the caller forgot to list is a pad never checked.
    pad_table_.resize(n, Range{0, 0});
    for (size_t i = 0; i < nchanged; ++i) {
      if (changed[i] < n) pad_table_[changed[i]] = table[changed[i]];
    }
  }
  count_all(pad_table_.data(), n, byte, hits);
  pad_table_valid_ = true;
}

}  // namespace metrale::backend::host
