// The pool's figures, read in one consistent snapshot under its lock.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metrale::core::pool {

struct PoolStats {
  size_t reserved = 0;        // bytes of all chunks held from the source
  size_t in_use = 0;          // bytes of blocks handed out (rounded sizes)
  size_t requested = 0;       // bytes the callers asked for, of those blocks
  size_t cached = 0;          // reserved - in_use: free or pending blocks
  size_t peak_in_use = 0;     // highest in_use since creation (or reset_peak)
  uint64_t chunk_allocs = 0;  // chunks fetched from the source
  uint64_t chunk_frees = 0;   // chunks given back (trim, out-of-memory retry)
  size_t largest_free = 0;    // the largest free block, any stream, ready or not
  uint64_t blocks_in_use = 0;
  uint64_t blocks_pending = 0;  // freed, waiting for other streams' events
};

}  // namespace metrale::core::pool
