// Red zones with METRALE_REDZONE_REUSE=n (core/pad_reuse.cpp): a padded
// block freed on its own stream may go straight back to that stream's reuse
// bins with its pad unchecked, to be handed out again only to an allocation
// of the same size and pad (whose pad then lies on the same bytes). Up to
// n owners share one check of the pad; PadOwners names them, so that an
// overrun found by that check names every allocation that may have written
// it. An unchecked block never reaches the free index (where it would merge
// or split) and never serves another size: the pool hands it to its
// UncheckedSink, which queues the check, whenever it would.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metrale::core::pool {

struct PadOwners {
  static constexpr uint32_t kMax = 16;  // the largest METRALE_REDZONE_REUSE
  struct Owner {
    uint64_t seq = 0;
    uint32_t site = 0;       // a ledger site id: where it was allocated
    uint32_t free_site = 0;  // and freed
    uint32_t tag = 0;
    int kind = 0;            // metrale_alloc_kind_t
  };
  uint32_t count = 0;  // owners recorded, oldest first
  size_t bytes = 0;    // every owner's size as asked: its pad starts there
  size_t pad = 0;
  Owner owner[kMax];
};

// The allocation a caller takes a block for: an unchecked block serves only
// the same bytes and pad (pad 0: no unchecked block at all).
struct ReuseKey {
  size_t bytes = 0;
  size_t pad = 0;
  bool accepts(const PadOwners& o) const {
    return pad != 0 && o.bytes == bytes && o.pad == pad;
  }
};

struct Block;

// Where the pool sends an unchecked block it must not keep or hand out:
// handed out to the sink (its counters as for an allocation of its last
// owner's bytes plus pad), with the pool's lock held (so it must not call
// out: no log). false: the sink could not take it; the pool then drops the
// block's pattern record and caches it as any free block (the pad goes
// unchecked: the sink counts it and logs it once the lock is released).
class UncheckedSink {
 public:
  virtual ~UncheckedSink() = default;
  virtual bool take_unchecked(Block* b) noexcept = 0;
};

}  // namespace metrale::core::pool
