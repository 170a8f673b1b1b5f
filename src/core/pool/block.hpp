// A block: one piece of a chunk, handed out or free. The blocks of a chunk
// form a doubly linked list in address order (prev/next), which is what
// splitting and coalescing walk. The next session adds the ledger entry
// (size asked, seq, site, red-zone pad) here, so that the pool's own
// bookkeeping is the ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/pool/chunk_source.hpp"
#include "core/pool/pad_owners.hpp"

namespace metrale::core::pool {

struct Chunk;

// Red zones (core/pad_verify_ops.cpp): a byte range of a block, as offsets
// from its start, known to hold METRALE_REDZONE_PATTERN: written by the
// library and checked intact since, with nothing handed out over it. None
// (from == kNoPattern) when unknown.
constexpr size_t kNoPattern = std::numeric_limits<size_t>::max();
struct PatternRange {
  size_t from = kNoPattern;
  size_t to = 0;
  bool known() const { return from != kNoPattern && from < to; }
  // Whether [lo, hi) lies inside.
  bool covers(size_t lo, size_t hi) const { return known() && from <= lo && hi <= to; }
};

enum class BlockState : uint8_t {
  ALLOCATED,  // handed out
  FREE,       // in its stream's free index
  PENDING,    // freed, waiting for the events of the other streams that used it
  BINNED,     // freed, in its stream's reuse bins (reuse_bins.hpp): not coalesced
};

struct Block {
  DevPtr ptr = 0;
  size_t size = 0;       // a multiple of 512
  size_t requested = 0;  // what the caller asked for (ALLOCATED only)
  StreamId stream = 0;   // allocated: the stream it was taken for; free: its owner
  Chunk* chunk = nullptr;
  Block* prev = nullptr;  // address neighbours inside the chunk
  Block* next = nullptr;
  Block* bin_next = nullptr;  // BINNED only: the next block of the same bin
  // The owner stream's free count when it was freed: the block is safe for
  // another stream once an event covering this count has completed. 0: the
  // memory was never used (fresh from a chunk) or is known complete.
  uint64_t epoch = 0;
  BlockState state = BlockState::FREE;
  // Other streams the block was used on (record_stream), ALLOCATED only.
  std::vector<StreamId> uses;
  // PENDING only: one event per stream in `uses`, recorded at the free.
  std::vector<EventId> pending_events;
  // Red zones: the checked pattern the block carries (see PatternRange).
  // Set only by the context (on a padded hand-out, and through free's
  // pattern argument after a check); every other free drops it, and split
  // and merge keep only what the layout proves (the functions below).
  PatternRange pattern;
  // METRALE_REDZONE_REUSE: the owners whose pad here is unchecked (while
  // BINNED, and while handed out to one more owner of the same size; see
  // pad_owners.hpp). Kept, emptied, between chains.
  std::unique_ptr<PadOwners> owners;
  bool unchecked() const { return owners != nullptr && owners->count != 0; }
};

// The records of the two halves of a split at `at`: what of the range lies
// in each, the rest's shifted to its start.
inline PatternRange head_pattern_after_split(PatternRange p, size_t at) {
  PatternRange h;
  if (p.known() && p.from < at) h = PatternRange{p.from, p.to < at ? p.to : at};
  return h;
}
inline PatternRange rest_pattern_after_split(PatternRange p, size_t at) {
  PatternRange r;
  if (p.known() && p.to > at) r = PatternRange{(p.from > at ? p.from : at) - at, p.to - at};
  return r;
}
// The record of front+back merged: one range, so the two join when they
// touch, else the longer is kept.
inline PatternRange pattern_after_merge(size_t front_size, PatternRange front,
                                        PatternRange back) {
  PatternRange b;
  if (back.known()) b = PatternRange{front_size + back.from, front_size + back.to};
  if (!front.known()) return b;
  if (!b.known()) return front;
  if (front.to == b.from) return PatternRange{front.from, b.to};
  return (front.to - front.from) >= (b.to - b.from) ? front : b;
}

struct Chunk {
  DevPtr base = 0;
  size_t size = 0;
  bool small = false;
  uint64_t serial = 0;   // fetch order (oldest first)
  Block* first = nullptr;
};

}  // namespace metrale::core::pool
