// Size classes of the caching pool: how a request is rounded, which pool
// (small or large) serves it, how big a chunk is fetched for it, and when a
// block is worth splitting.
//
// Why these numbers (they follow PyTorch's CUDACachingAllocator, whose
// behaviour users of a framework already tune for):
// - 512-byte granularity: cuMemAlloc aligns to 256 B and many kernels assume
//   it; 512 keeps every block 256-aligned even after splits, keeps the number
//   of distinct sizes (and so the best-fit index) small, and wastes at most
//   511 B per block, under 0.2 % for anything above 256 KiB. Finer classes
//   would make more slivers that nothing can reuse.
// - Small blocks (<= 1 MiB) come from 2 MiB chunks and are split down to any
//   512-multiple: many small tensors share one driver allocation.
// - Large blocks (> 1 MiB) come from 20 MiB chunks up to 10 MiB, and from a
//   chunk of their own size rounded to 2 MiB above that. A large block is
//   split only when more than 1 MiB would be left over, so the large pool
//   never fills with slivers that only small requests could use (small
//   requests never take large blocks and vice versa: mixing them is what
//   fragments a pool over a long run).
#pragma once

#include <cstddef>
#include <cstdint>

namespace metrale::core::pool {

constexpr size_t kGranularity = 512;
constexpr size_t kSmallLimit = size_t{1} << 20;        // <= this: small pool
constexpr size_t kSmallChunk = size_t{2} << 20;        // chunk of the small pool
constexpr size_t kMidLimit = size_t{10} << 20;         // < this: 20 MiB chunks
constexpr size_t kLargeChunk = size_t{20} << 20;
constexpr size_t kLargeRound = size_t{2} << 20;        // rounding of big chunks
constexpr size_t kLargeMinRemainder = size_t{1} << 20;  // split large only above this
// Requests above this are refused (rounding would overflow size_t).
constexpr size_t kMaxRequest = ~size_t{0} - kLargeChunk;

// The block size for a request: a multiple of 512, at least 512 (a request
// of 0 bytes still gets a pointer of its own). Callers check kMaxRequest.
constexpr size_t round_size(size_t bytes) {
  if (bytes < kGranularity) return kGranularity;
  return (bytes + kGranularity - 1) & ~(kGranularity - 1);
}

constexpr bool is_small(size_t rounded) { return rounded <= kSmallLimit; }

// The chunk to fetch from the source when no cached block fits.
constexpr size_t chunk_size_for(size_t rounded) {
  if (is_small(rounded)) return kSmallChunk;
  if (rounded < kMidLimit) return kLargeChunk;
  return (rounded + kLargeRound - 1) & ~(kLargeRound - 1);
}

// Whether a free block of `block_size` serving `rounded` should be split,
// leaving the remainder free in the same pool.
constexpr bool should_split(size_t block_size, size_t rounded) {
  const size_t rest = block_size - rounded;
  return is_small(rounded) ? rest >= kGranularity : rest > kLargeMinRemainder;
}

}  // namespace metrale::core::pool
