// A block: one piece of a chunk, handed out or free. The blocks of a chunk
// form a doubly linked list in address order (prev/next), which is what
// splitting and coalescing walk. The next session adds the ledger entry
// (size asked, seq, site, red-zone pad) here, so that the pool's own
// bookkeeping is the ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>
#include <vector>

#include "core/pool/chunk_source.hpp"

namespace metrale::core::pool {

struct Chunk;

// Block::pattern_from when no tail of the block is known to hold the
// red-zone pattern.
constexpr size_t kNoPattern = std::numeric_limits<size_t>::max();

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
  // Red zones (core/pad_verify_ops.cpp): [pattern_from, size) holds
  // METRALE_REDZONE_PATTERN, written by the library and checked intact when
  // the block came back; kNoPattern: unknown. Set only by the context (on a
  // padded hand-out, and through free's pattern argument after a check);
  // every other free, split, merge or recycle keeps it only where the
  // layout proves it (tail_after_split, tail_after_merge), else drops it.
  size_t pattern_from = kNoPattern;
};

// The pattern record of the two halves of a split at `at`: the head keeps
// [pattern_from, at) when the tail starts inside it, the rest is all pattern
// from its start, or from where the tail starts inside it.
inline size_t head_pattern_after_split(size_t pattern_from, size_t at) {
  return pattern_from <= at ? pattern_from : kNoPattern;
}
inline size_t rest_pattern_after_split(size_t pattern_from, size_t at) {
  if (pattern_from == kNoPattern) return kNoPattern;
  return pattern_from <= at ? 0 : pattern_from - at;
}
// The record of front+back merged: back's tail is the merged block's tail;
// when back is all pattern, front's tail joins it.
inline size_t pattern_after_merge(size_t front_size, size_t front_pattern,
                                  size_t back_pattern) {
  if (back_pattern == kNoPattern) return kNoPattern;
  if (back_pattern == 0) return front_pattern != kNoPattern ? front_pattern : front_size;
  return front_size + back_pattern;
}

struct Chunk {
  DevPtr base = 0;
  size_t size = 0;
  bool small = false;
  uint64_t serial = 0;   // fetch order (oldest first)
  Block* first = nullptr;
};

}  // namespace metrale::core::pool
