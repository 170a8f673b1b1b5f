// The free blocks of one stream in one pool (small or large), ordered by
// size then address, for best-fit lookup: the smallest block that is large
// enough, the lowest address among equals (which keeps allocations packed
// at the start of chunks and lets the tail coalesce back into whole chunks).
//
// An ordered tree (std::set with its nodes recycled): O(log n) insert,
// erase and lookup. Not locked: the pool's lock covers it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <set>

#include "core/pool/block.hpp"
#include "core/pool/node_recycler.hpp"

namespace metrale::core::pool {

class FreeIndex {
 public:
  void insert(Block* b) { set_.insert(b); }
  void erase(Block* b) { set_.erase(b); }
  bool empty() const { return set_.empty(); }
  size_t count() const { return set_.size(); }
  // The largest free block, 0 when empty.
  size_t largest() const { return set_.empty() ? 0 : (*set_.rbegin())->size; }

  // How many too-new blocks a look from another stream skips at most.
  static constexpr size_t kMaxScan = 64;
  // The best fit for `size` whose epoch is at most `max_epoch` (a block freed
  // after the newest completed event is skipped, up to kMaxScan of them);
  // nullptr when none. With max_epoch = UINT64_MAX (the owner stream
  // itself) this is one lookup.
  Block* best_fit(size_t size, uint64_t max_epoch) const;
  // Whether some block of at least `size` exists, ready or not.
  bool has_fit(size_t size) const;
  // Calls f(Block*) for each free block; f must not change the index.
  template <class F>
  void for_each(F&& f) const {
    for (Block* b : set_) f(b);
  }

 private:
  struct BySizeThenAddr {
    bool operator()(const Block* a, const Block* b) const {
      return a->size != b->size ? a->size < b->size : a->ptr < b->ptr;
    }
  };
  std::set<Block*, BySizeThenAddr, NodeRecycler<Block*>> set_;
};

}  // namespace metrale::core::pool
