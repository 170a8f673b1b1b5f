// A block: one piece of a chunk, handed out or free. The blocks of a chunk
// form a doubly linked list in address order (prev/next), which is what
// splitting and coalescing walk. The next session adds the ledger entry
// (size asked, seq, site, red-zone pad) here, so that the pool's own
// bookkeeping is the ledger.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "core/pool/chunk_source.hpp"

namespace metrale::core::pool {

struct Chunk;

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
};

struct Chunk {
  DevPtr base = 0;
  size_t size = 0;
  bool small = false;
  uint64_t serial = 0;   // fetch order (oldest first)
  Block* first = nullptr;
};

}  // namespace metrale::core::pool
