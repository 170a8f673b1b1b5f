// Merging free blocks across stream owners, the pool's answer to
// fragmentation by ownership.
//
// Blocks coalesce on free only with neighbours owned by the same stream
// (insert_free): a neighbour another stream freed may still be in use
// there. But a block taken by another stream and freed there comes back
// owned by that stream, in the middle of a chunk whose other free blocks
// belong to the first: over a training run's steps the chunks turn into
// checkerboards of owners, no free block is large enough for the big
// requests, and the pool fetches chunk after chunk (a transformer-shaped
// trace grew its reserved bytes by ~40 % over 4 replays before this).
// Once the events of both owners show a block's last use complete, its
// owner no longer matters: such runs are merged here and handed to the
// stream that asked. Only on the way to a new chunk (a driver call that
// costs far more than this walk), never on the fast path.
#include <unordered_map>
#include <vector>

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

size_t CachingPool::merge_completed(StreamId stream) {
  for (auto& kv : streams_) flush_bins(*kv.second);
  // Seeds: free blocks with a free neighbour of another owner (same-owner
  // neighbours were merged when freed).
  auto free_block = [](const Block* b) { return b != nullptr && b->state == BlockState::FREE; };
  std::vector<Block*> seeds;
  for (auto& kv : streams_) {
    for (bool small : {true, false}) {
      kv.second->index(small).for_each([&](Block* b) {
        if ((free_block(b->prev) && b->prev->stream != b->stream) ||
            (free_block(b->next) && b->next->stream != b->stream)) {
          seeds.push_back(b);
        }
      });
    }
  }
  if (seeds.empty()) return 0;
  // The newest completed epoch of each owner (events polled, never waited);
  // an owner of a seed gets an event covering its frees, so that a later
  // miss finds them complete.
  std::unordered_map<StreamId, uint64_t> ready;
  for (Block* b : seeds) {
    if (ready.count(b->stream) != 0) continue;
    StreamState& s = state_for(b->stream);
    cover_if_not_capturing(s);
    ready[b->stream] = s.ready_epoch(src_);
  }
  auto complete = [&](const Block* b) {
    if (!free_block(b)) return false;
    auto it = ready.find(b->stream);
    return b->epoch == 0 || (it != ready.end() && b->epoch <= it->second);
  };
  size_t merged = 0;
  StreamState& mine = state_for(stream);
  for (Block* b : seeds) {
    if (b->chunk == nullptr || !complete(b)) continue;  // merged away already
    if (!complete(b->prev) && !complete(b->next)) continue;
    while (complete(b->prev)) b = b->prev;
    const bool small = b->chunk->small;
    state_for(b->stream).index(small).erase(b);
    while (complete(b->next)) {
      Block* n = b->next;
      state_for(n->stream).index(small).erase(n);
      b->pattern = pattern_after_merge(b->size, b->pattern, n->pattern);
      b->size += n->size;
      b->next = n->next;
      if (n->next != nullptr) n->next->prev = b;
      recycle(n);
      ++merged;
    }
    b->stream = stream;
    b->epoch = 0;  // known complete: reusable on any stream
    mine.index(small).insert(b);
  }
  return merged;
}

}  // namespace metrale::core::pool
