// The pool's read-only answers: stats and the peak reset.
#include <algorithm>

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

PoolStats CachingPool::stats() const {
  std::lock_guard<FastMutex> lock(mu_);
  return stats_held();
}

PoolStats CachingPool::stats_held() const {
  PoolStats s = st_;
  s.cached = s.reserved - s.in_use;
  s.largest_free = 0;
  for (const auto& kv : streams_) {
    s.largest_free = std::max({s.largest_free, kv.second->index(true).largest(),
                               kv.second->index(false).largest(), kv.second->bins().largest()});
  }
  return s;
}

PoolStats CachingPool::totals() const {
  std::lock_guard<FastMutex> lock(mu_);
  PoolStats s = st_;
  s.cached = s.reserved - s.in_use;
  return s;
}

void CachingPool::reset_peak() {
  std::lock_guard<FastMutex> lock(mu_);
  st_.peak_in_use = st_.in_use;
}

StreamId CachingPool::block_stream(const Block* b) const {
  std::lock_guard<FastMutex> lock(mu_);
  return b->stream;
}

void CachingPool::set_stream(Block* b, StreamId stream) {
  std::lock_guard<FastMutex> lock(mu_);
  // A stream retired meanwhile (a quarantine or red-zone list that took the
  // block before the retirement moved its entries) ran all its work: the
  // block keeps its stream, and a dead handle never becomes a block's own
  // (its free would be refused, and the block lost).
  if (retired_.count(stream) != 0) return;
  b->stream = stream;
}

}  // namespace metrale::core::pool
