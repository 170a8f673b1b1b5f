// Giving cached chunks back: trim(keep_bytes) and the out-of-memory path.
// Both wait for the frees first (pool_settle.cpp: the only blocking event
// calls of the pool; trim's without the lock), then release whole chunks
// whose blocks are all free and known complete, largest first (ties: oldest
// first): the fewest source calls reach the goal, and the 2 MiB chunks that
// serve the frequent small sizes stay cached longest.
#include <algorithm>

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

size_t CachingPool::release_cached(size_t keep_bytes) {
  if (st_.reserved - st_.in_use <= keep_bytes) return 0;
  // No wait here: a free made since the settle (another thread's) or on a
  // stream that captures keeps its chunk cached.
  for (auto& kv : streams_) {
    flush_bins(*kv.second);
    kv.second->ready_epoch(src_);
  }
  std::vector<Chunk*> whole;
  for (auto& c : chunks_) {
    bool all_free = true;
    for (Block* b = c->first; b != nullptr; b = b->next) {
      // A free block's stream has its state (its free index holds it).
      if (b->state != BlockState::FREE || b->epoch > streams_.at(b->stream)->done()) {
        all_free = false;
        break;
      }
    }
    if (all_free) whole.push_back(c.get());
  }
  std::sort(whole.begin(), whole.end(), [](const Chunk* a, const Chunk* b) {
    return a->size != b->size ? a->size > b->size : a->serial < b->serial;
  });
  size_t released = 0;
  for (Chunk* c : whole) {
    if (st_.reserved - st_.in_use <= keep_bytes) break;
    // Room for its blocks among the spares first: once the driver has the
    // chunk back nothing may fail, or a later trim would free it twice.
    size_t blocks = 0;
    for (Block* b = c->first; b != nullptr; b = b->next) ++blocks;
    spare_blocks_.reserve(spare_blocks_.size() + blocks);  // throws: nothing done
    src_.chunk_free(c->base, c->size);  // throws: the chunk stays, intact
    for (Block* b = c->first; b != nullptr;) {
      Block* next = b->next;
      state_for(b->stream).index(c->small).erase(b);
      recycle(b);
      b = next;
    }
    st_.reserved -= c->size;
    ++st_.chunk_frees;
    released += c->size;
    auto it = std::find_if(chunks_.begin(), chunks_.end(),
                           [c](const std::unique_ptr<Chunk>& p) { return p.get() == c; });
    *it = std::move(chunks_.back());
    chunks_.pop_back();
  }
  return released;
}

size_t CachingPool::trim(size_t keep_bytes) {
  {
    std::lock_guard<FastMutex> lock(mu_);
    if (st_.reserved - st_.in_use <= keep_bytes) return 0;
  }
  settle(0);
  std::lock_guard<FastMutex> lock(mu_);
  return release_cached(keep_bytes);
}

}  // namespace metrale::core::pool
