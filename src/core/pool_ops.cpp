// The caching pool's calls on a context: record_stream, stats and trim.
// Allocation and the frees live in memory.cpp and pool_fast_path.cpp.
#include <cstring>

#include "core/context.hpp"
#include "core/format.hpp"

using metrale::fail;
using metrale::core::hex;

void metrale_context::record_stream(DevPtr ptr, metrale_stream* s) {
  fault_.check();
  metrale::core::StreamObj* st = stream_of(s);
  bool found = ledger_.with_entry(ptr, [&](const metrale::core::LedgerEntry& e) {
    // Under the ledger's lock: no free can hand the block back meanwhile.
    if (e.block != nullptr) pool_->record_stream_held(e.block, st->handle);  // shared lock
  });
  if (!found) refuse_free(ptr);  // NOT_FOUND, or the interior pointer's message
}

void metrale_context::pool_stats(metrale_pool_stats_t* out) const {
  const size_t size = out->struct_size;
  metrale_pool_stats_t s{};
  s.struct_size = size;
  if (pool_) {
    metrale::core::pool::PoolStats p;
    {
      // One moment for the pool and the blocks waiting for their check (its
      // lock is the list's): a block a check pass moves is counted once.
      std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
      p = pool_->stats_held();
      s.pads_pending = pad_verify_.count_held();
      s.pads_pending_bytes = pad_verify_.bytes_held();
    }
    s.enabled = 1;
    s.reserved_bytes = p.reserved;
    s.in_use_bytes = p.in_use;
    s.requested_bytes = p.requested;
    s.cached_bytes = p.cached;
    s.peak_in_use_bytes = p.peak_in_use;
    s.chunk_allocs = p.chunk_allocs;
    s.chunk_frees = p.chunk_frees;
    s.largest_free_block = p.largest_free;
    s.blocks_in_use = p.blocks_in_use;
    // The freed-pad check is the pool's: with the pool off its figures are 0.
    s.pad_fills = pad_verify_.fills.load(std::memory_order_relaxed);
    s.pad_fills_skipped = pad_verify_.fills_skipped.load(std::memory_order_relaxed) +
                          pad_verify_.fills_skipped_held.load(std::memory_order_relaxed);
    s.pad_checks = pad_verify_.passes.load(std::memory_order_relaxed);
    s.pads_checked = pad_verify_.verified.load(std::memory_order_relaxed);
    s.pads_overwritten = pad_verify_.dirty.load(std::memory_order_relaxed);
    s.pads_unlisted = pad_verify_.unlisted.load(std::memory_order_relaxed);
  }
  // The quarantine holds driver memory back with the pool off too.
  s.quarantined_bytes = quarantined_bytes();
  // An older layout (struct_size checked by the api) gets the fields it has.
  std::memcpy(static_cast<void*>(out), &s, size < sizeof s ? size : sizeof s);
}

// The device pool down to keep_bytes, and the pinned host cache emptied
// (its blocks are page-locked host memory nobody uses until a reuse).
size_t metrale_context::pool_trim(size_t keep_bytes) {
  fault_.check();
  // Streams whose retirement a wait cycle put off: their blocks may go now.
  drain_retirements();
  // Frees a capture's end could not release for want of memory.
  if (pool_) release_deferred(0);
  // Blocks waiting for their red-zone check first (those reused unchecked
  // too): checked, they are cached.
  flush_unchecked_pads();
  const uint64_t failures = release_failures_.load(std::memory_order_relaxed);
  if (pad_verify_.count() != 0) verify_freed_pads(true);
  if (release_failures_.load(std::memory_order_relaxed) != failures) {
    // Their chunks cannot be given back now (rule 1's exception: what was
    // released so far stays released).
    fail(METRALE_ERROR_OUT_OF_MEMORY,
         "pool trim: out of host memory returning checked freed blocks to the pool; they wait "
         "for the next red-zone check and their chunks stay reserved: free host memory and "
         "call metrale_pool_trim again");
  }
  size_t released = pinned_pool_trim(0);
  if (pool_) released += device([&] { return pool_->trim(keep_bytes); });
  return released;
}
