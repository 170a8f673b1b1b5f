#include "core/pool/free_index.hpp"

namespace metrale::core::pool {

Block* FreeIndex::best_fit(size_t size, uint64_t max_epoch) const {
  Block key;
  key.size = size;
  key.ptr = 0;
  auto it = set_.lower_bound(&key);
  if (max_epoch == UINT64_MAX) return it == set_.end() ? nullptr : *it;
  // Another stream's look: skip blocks freed after the newest completed
  // event, but only so far (a stream with many fresh frees must not make
  // every miss elsewhere a long walk); a miss fetches a chunk instead.
  for (size_t n = 0; it != set_.end() && n < kMaxScan; ++it, ++n) {
    if ((*it)->epoch <= max_epoch) return *it;
  }
  return nullptr;
}

bool FreeIndex::has_fit(size_t size) const { return largest() >= size; }

}  // namespace metrale::core::pool
