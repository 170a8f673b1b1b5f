#include "core/pool/free_index.hpp"

namespace metrale::core::pool {

Block* FreeIndex::best_fit(size_t size, uint64_t max_epoch) const {
  Block key;
  key.size = size;
  key.ptr = 0;
  for (auto it = set_.lower_bound(&key); it != set_.end(); ++it) {
    if ((*it)->epoch <= max_epoch) return *it;
  }
  return nullptr;
}

bool FreeIndex::has_fit(size_t size) const { return largest() >= size; }

}  // namespace metrale::core::pool
