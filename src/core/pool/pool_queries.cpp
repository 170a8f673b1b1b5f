// The pool's read-only answers: stats, block sizes, and the peak reset.
#include <algorithm>

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

PoolStats CachingPool::stats() const {
  std::lock_guard<std::mutex> lock(mu_);
  PoolStats s = st_;
  s.cached = s.reserved - s.in_use;
  s.largest_free = 0;
  for (const auto& kv : streams_) {
    s.largest_free = std::max({s.largest_free, kv.second->index(true).largest(),
                               kv.second->index(false).largest()});
  }
  return s;
}

void CachingPool::reset_peak() {
  std::lock_guard<std::mutex> lock(mu_);
  st_.peak_in_use = st_.in_use;
}

size_t CachingPool::block_size(DevPtr ptr) const {
  std::lock_guard<std::mutex> lock(mu_);
  auto it = allocated_.find(ptr);
  return it == allocated_.end() ? 0 : it->second->size;
}

}  // namespace metrale::core::pool
