// The padded pooled allocation and free in one lock each, as the padless
// pool path (memory.cpp's alloc_pooled and free_impl's first branch): the
// seq, the block, the pattern check and the ledger entry under the ledger's
// lock (which is the pool's); a free's entry leaves and its block joins the
// red-zone check list (pad_verify_queue.hpp) under it too (that part is
// pool_fast_path.cpp's queue_freed_pad_inline, inline in the free). Only a block
// whose pad must be filled leaves the lock for the fill (a device call and,
// for metrale_alloc, a wait), as before.
#include <limits>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::fail;
using metrale::core::pool::Block;
using metrale::core::pool::PatternRange;

namespace {

[[gnu::noinline]] void log_large_slow(size_t bytes, const char* file, int line, uint64_t ptr) {
  // As alloc_unlogged: should_log first, the arguments are strings.
  if (metrale::core::log().should_log(spdlog::level::debug)) {
    metrale::core::log().debug("alloc {} at {}:{} (device ptr {})",
                               metrale::core::human_bytes(bytes), file, line,
                               metrale::core::hex(ptr));
  }
}

// The size test inline: most allocations are small and make no call.
inline void log_large(size_t bytes, const char* file, int line, uint64_t ptr) {
  if (bytes >= (size_t{32} << 20)) [[unlikely]] log_large_slow(bytes, file, line, ptr);
}

}  // namespace

metrale_context::DevPtr metrale_context::alloc_pooled_padded(size_t bytes,
                                                             metrale_alloc_kind_t kind,
                                                             metrale::core::StreamObj* st,
                                                             const char* file, int line,
                                                             bool wait) {
  // The entry's parts in locals: the whole entry is built only on a miss
  // (out of line, so this frame stays small: the miss path's strings and
  // records made it 0x208 bytes, ~25 Ir of spills per pair, r27).
  Block* b = nullptr;
  DevPtr ptr = 0;
  uint64_t seq = 0;
  size_t pad = 0;
  metrale::core::Ledger::Ready r{0, 0};
  bool wraps = false;
  {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    pad = seq >= opts_.redzone_min_index ? opts_.redzone_bytes : 0;
    wraps = bytes > std::numeric_limits<size_t>::max() - pad;
    if (!wraps) {
      // All that may fail on the ledger's side, before a block is taken.
      r = ledger_.ready_locked(file, line, pad > 0);
      const metrale::core::pool::ReuseKey key{bytes, pad};
      try {
        // The binned block of this size first, inline, as alloc_pooled
        // (through device() and allocate_held a padded pair measured ~35 ns
        // slower on the host backend, r18). No release of the cache on the
        // full try: the retry below releases it after the blocks waiting
        // for their check are back, and its message tells what it released.
        b = pool_->take_binned_held(bytes + pad, st->handle, key);
        if (b == nullptr) {
          b = device([&] {
            return pool_->allocate_held(bytes + pad, st->handle, false, false, key);
          });
        }
      } catch (const Error& e) {
        if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
        // Retried below, out of the lock, after the blocks waiting for their
        // check went back to the pool.
      }
    }
    if (b != nullptr && (pad == 0 || b->pattern.covers(bytes, bytes + pad))) {
      // No fill: the pad lies inside the block's checked pattern.
      if (pad > 0) {
        b->pattern = PatternRange{bytes, b->pattern.to};
        pad_verify_.count_fill_skipped_held();  // the ledger's lock is the list's
      }
      ptr = b->ptr;
      chunk_source_->block_handed_out(ptr, bytes + pad);
      // In place, field by field (no copy of a whole entry: its 16-byte
      // loads would wait for the 8-byte stores that built it), the pad
      // appended to the room made.
      ledger_.commit_locked(ptr, [&](metrale::core::LedgerEntry& slot) {
        slot.bytes = bytes;
        slot.reserved = b->size;
        slot.pad = pad;
        slot.seq = seq;
        slot.site = r.site;
        slot.kind = kind;
        slot.tag = r.tag;
        slot.block = b;
      });
      count_alloc_held(bytes);
    }
  }
  if (ptr != 0) [[likely]] {
    // The pool sent unchecked blocks to their check and the list is full.
    if (unchecked_due_.load(std::memory_order_relaxed)) [[unlikely]] run_unchecked_due();
    log_large(bytes, file, line, ptr);
    return ptr;
  }
  metrale::core::LedgerEntry entry;
  entry.bytes = bytes;
  entry.kind = kind;
  entry.seq = seq;
  entry.pad = pad;
  entry.site = r.site;
  entry.tag = r.tag;
  return alloc_pooled_padded_miss(bytes, st, file, line, wait, entry, b, wraps);
}

[[gnu::noinline]] metrale_context::DevPtr metrale_context::alloc_pooled_padded_miss(
    size_t bytes, metrale::core::StreamObj* st, const char* file, int line, bool wait,
    const metrale::core::LedgerEntry& first, Block* b, bool wraps) {
  metrale::core::LedgerEntry entry = first;
  if (wraps) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, "out of device memory: asked " + std::to_string(bytes) +
                                          " bytes plus a " + std::to_string(entry.pad) +
                                          "-byte red zone at " +
                                          metrale::core::site_text(file, line) +
                                          ", more than the address space holds");
  }
  if (b == nullptr) {
    try {
      // Blocks cached unchecked (METRALE_REDZONE_REUSE) are in the list
      // already: the pool empties every stream's bins before it asks for
      // a chunk, and sends those to their check.
      if (pad_verify_.count() != 0) verify_freed_pads(true);
      b = device([&] { return pool_->allocate(bytes + entry.pad, st->handle); });
    } catch (const Error& e) {
      if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
      throw Error(METRALE_ERROR_OUT_OF_MEMORY, oom_message(bytes, file, line, false, true, e),
                  e.driver_code());
    }
  }
  chunk_source_->block_handed_out(b->ptr, bytes + entry.pad);
  // The block goes back when the fill or the record fails: a failed call
  // keeps nothing (the pool frees it in stream order, after a fill issued).
  const auto give_back = [&]() noexcept {
    try {
      chunk_source_->block_returned(b->ptr);
      pool_->free(b);
    } catch (...) {
      // The first error is the one the caller needs.
    }
  };
  try {
    if (entry.pad > 0) prepare_pooled_pad(b, bytes, entry.pad, st, false, wait);
    entry.reserved = b->size;
    entry.block = b;
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    ledger_.record_locked(b->ptr, entry, file, line);
    count_alloc_held(bytes);
  } catch (...) {
    give_back();  // the ledger's lock (the pool's) is released by now
    throw;
  }
  if (unchecked_due_.load(std::memory_order_relaxed)) run_unchecked_due();
  log_large(bytes, file, line, b->ptr);
  return b->ptr;
}
