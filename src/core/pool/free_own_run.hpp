// CachingPool::free_own_run_held: a red-zone check gives a whole batch of
// freed blocks back at once (core/pad_release.cpp), most of them of one
// size and stream in the loop that allocates and frees the same shape.
// Blocks of one run go into their bin as one chain: the stream's state,
// the bin and its room looked up once per run, the counters summed, where
// free_own_held per block looked each up again (~60 instructions a block
// on the host backend, r27). Same result as free_own_held for each block
// in turn: the same bin order (newest first), epochs and counters.
#pragma once

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

template <class Get>
size_t CachingPool::free_own_run_held(size_t from, size_t n, Get&& get) {
  size_t i = from;
  while (i < n) {
    const OwnFree first = get(i);
    Block* const tail = first.b;
    if (!tail->uses.empty() || first.on != tail->stream) return i;
    StreamState& owner = state_for(tail->stream);
    const StreamId stream = tail->stream;
    const size_t size = tail->size;
    // A block with no checked range has the usual cap: one at a time.
    const uint32_t room = first.pattern.known() ? owner.bins().room(size, checked_bin_cap_) : 0;
    if (room == 0) {
      free_own_held(tail, first.pattern);  // its free index, or the usual cap
      ++i;
      continue;
    }
    Block* head = nullptr;
    uint32_t k = 0;
    size_t bytes = 0;
    size_t requested = 0;
    for (; i < n && k < room; ++i, ++k) {
      const OwnFree f = get(i);
      Block* b = f.b;
      if (b->size != size || b->stream != stream || f.on != stream || !b->uses.empty() ||
          !f.pattern.known()) {
        break;
      }
      b->pattern = f.pattern;
      if (b->owners != nullptr) b->owners->count = 0;  // a checked free
      bytes += b->size;
      requested += b->requested;
      b->requested = 0;
      b->epoch = owner.next_epoch();
      b->state = BlockState::BINNED;
      b->bin_next = head;
      head = b;
    }
    // What release_counts does per block, for the run.
    st_.in_use -= bytes;
    st_.requested -= requested;
    st_.blocks_in_use -= k;
    owner.bins().put_chain(size, head, tail, k);
  }
  return n;
}

}  // namespace metrale::core::pool
