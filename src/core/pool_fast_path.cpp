// The common pooled case of metrale_alloc, metrale_free and
// metrale_free_async on the block's own stream: pool on, no checked
// pointers, no capture open, no event log (the free: red zones too; the
// padded alloc is pad_fast_path.cpp's). The block and its ledger
// entry move under one lock (the ledger's, which the pool shares), with no
// copy of the entry, no second lookup and nothing that can fail once the
// block is taken. Everything else goes through memory.cpp (alloc_unlogged,
// free_impl), which also handles every error: the fast free only acts on a
// live pooled pointer not marked with record_stream, and otherwise leaves
// the whole call to free_impl, as if it had not looked.
#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::core::hex;
using metrale::core::human_bytes;

namespace {

constexpr size_t kLargeAlloc = 32ull * 1024 * 1024;  // the debug line, as in memory.cpp

}  // namespace

// Inline into alloc_pooled: the hot path makes no call for it.
[[gnu::always_inline]] inline void metrale_context::commit_pooled_held(metrale::core::pool::Block* b, size_t bytes,
                                         uint64_t seq, metrale::core::Ledger::Ready r,
                                         metrale_alloc_kind_t kind) {
  ledger_.commit_locked(b->ptr, [&](metrale::core::LedgerEntry& e) {
    e.bytes = bytes;
    e.reserved = b->size;
    e.seq = seq;
    e.site = r.site;
    e.kind = kind;
    e.tag = r.tag;
    e.block = b;
  });
  count_alloc_held(bytes);
}

metrale_context::DevPtr metrale_context::alloc_pooled(size_t bytes, metrale_alloc_kind_t kind,
                                                      metrale::core::StreamObj* st,
                                                      const char* file, int line) {
  DevPtr ptr = 0;
  metrale::core::pool::Block* b = nullptr;
  uint64_t seq = 0;
  try {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    // Every metrale_alloc call takes the next index, failed ones included
    // (see alloc_unlogged); under the ledger's lock, no atomic operation.
    seq = seq_.load(std::memory_order_relaxed);
    seq_.store(seq + 1, std::memory_order_relaxed);
    // All that may fail on the ledger's side, before a block is taken.
    const metrale::core::Ledger::Ready r = ledger_.ready_locked(file, line);
    b = pool_->take_binned_held(bytes, st->handle);
    if (b == nullptr) {
      try {
        // No release of the cache here: its wait would hold the lock.
        b = device([&] { return pool_->allocate_held(bytes, st->handle, false, false); });
      } catch (const Error& e) {
        if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;  // else the retry below
      }
    }
    if (b != nullptr) {
      ptr = b->ptr;
      chunk_source_->block_handed_out(ptr, bytes);
      commit_pooled_held(b, bytes, seq, r, kind);
    }
  } catch (const Error& e) {
    // The lock is released here: the message reads the ledger's sites.
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
    throw Error(METRALE_ERROR_OUT_OF_MEMORY, oom_message(bytes, file, line, false, true, e),
                e.driver_code());
  }
  if (ptr == 0) ptr = alloc_pooled_retry(bytes, kind, st, file, line, seq);
  if (bytes >= kLargeAlloc) [[unlikely]] {
    if (metrale::core::log().should_log(spdlog::level::debug)) {
      metrale::core::log().debug("alloc {} at {}:{} (device ptr {})", human_bytes(bytes), file,
                                 line, hex(ptr));
    }
  }
  return ptr;
}

// The pool had no block and no chunk without releasing its cache: the
// retry (pool.allocate) waits for the frees without the lock, since the
// work it waits for may be a host kernel that allocates, then releases.
metrale_context::DevPtr metrale_context::alloc_pooled_retry(size_t bytes,
                                                            metrale_alloc_kind_t kind,
                                                            metrale::core::StreamObj* st,
                                                            const char* file, int line,
                                                            uint64_t seq) {
  metrale::core::pool::Block* b = nullptr;
  try {
    b = device([&] { return pool_->allocate(bytes, st->handle); });
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
    throw Error(METRALE_ERROR_OUT_OF_MEMORY, oom_message(bytes, file, line, false, true, e),
                e.driver_code());
  }
  chunk_source_->block_handed_out(b->ptr, bytes);
  try {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    commit_pooled_held(b, bytes, seq, ledger_.ready_locked(file, line), kind);
  } catch (...) {
    chunk_source_->block_returned(b->ptr);
    pool_->free(b);  // a failed call keeps nothing
    throw;
  }
  return b->ptr;
}

// A padded pooled block just off the ledger joins the red-zone check list
// (see context.hpp), inline into free_pooled: no call per padded free.
[[gnu::always_inline]] inline bool metrale_context::queue_freed_pad_inline(
    DevPtr ptr, const metrale::core::LedgerEntry& e, metrale::core::StreamObj* st,
    const char* file, int line, bool* run_pass) noexcept {
  // METRALE_REDZONE_REUSE: back to the bins unchecked (pad_reuse.cpp).
  if (reuse_owners_ > 1 && chain_freed_pad_held(ptr, e, st, file, line)) {
    *run_pass = false;
    return true;
  }
  metrale::core::pool::Block* b = e.block;
  const bool filled = b->pattern.from == e.bytes && b->pattern.covers(e.bytes, e.bytes + e.pad);
  metrale::core::PendingPad* p = nullptr;
  uint32_t free_site = 0;
  try {
    // What may throw first: a new site's copy, room in the list.
    free_site = ledger_.intern_site_held(file != nullptr ? file : "<unknown>", line);
    p = &pad_verify_.emplace_held(ptr, e, free_site, st != nullptr ? st->handle : 0,
                                  filled ? b->pattern.to : e.bytes + e.pad,
                                  b->size);  // its mutex is the ledger's
  } catch (...) {
    return false;  // nothing queued: the caller's general path frees it
  }
  // Owners that shared the pad unchecked (METRALE_REDZONE_REUSE) move to p.
  if (b->unchecked()) take_earlier_owners_held(b, p);
  *run_pass = pad_verify_.commit_held();
  return true;
}

// The same out of line, for free_impl (memory.cpp).
bool metrale_context::queue_freed_pad_held(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                           metrale::core::StreamObj* st, const char* file,
                                           int line, bool* run_pass) noexcept {
  return queue_freed_pad_inline(ptr, e, st, file, line, run_pass);
}

// Inline into free() and free_on() below (its only callers): no second
// call per free. st != nullptr: only a block whose stream is st's (a free on
// its own stream, the same as a plain free; torch's frees are all of this
// kind).
[[gnu::always_inline]] inline bool metrale_context::free_pooled(DevPtr ptr,
                                                                metrale::core::StreamObj* st,
                                                                const char* file, int line) {
  // The conditions of free_impl's own pooled branch, and no event log (its
  // line needs a ticket taken before the memory can move: free_impl's job).
  if (ptr == 0 || !fast_free_ || !pooled_fast() || event_log_.on()) return false;
  bool check = false;
  {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    metrale::core::LedgerEntry* e = ledger_.find_locked(ptr);
    // Not live (free_impl says why), a driver allocation, or a block marked
    // with record_stream: free_impl, with nothing changed here.
    if (e == nullptr || e->block == nullptr || !e->block->uses.empty() ||
        (st != nullptr && e->block->stream != st->handle)) {
      return false;
    }
    metrale::core::pool::Block* b = e->block;
    const size_t bytes = e->bytes;
    if (e->pad != 0) {
      // A padded block waits for its red-zone check (pad_fast_path.cpp), as
      // in free_impl's first branch, without its second lock and lookup.
      if (!queue_freed_pad_inline(ptr, *e, st, file, line, &check)) return false;
      ledger_.forget_padded_locked(e);  // the list holds its copy
    } else {
      // Before the pool has it: after, another thread may hand it out again.
      chunk_source_->block_returned(ptr);
      pool_->free_own_held(b);
      ledger_.forget_padless_locked(e);
    }
    count_free_held(bytes);
  }
  if (check) verify_freed_pads(false);
  return true;
}

void metrale_context::free(DevPtr ptr, const char* file, int line) {
  if (!free_pooled(ptr, nullptr, file, line)) free_impl(ptr, nullptr, file, line);
}

void metrale_context::free_on(DevPtr ptr, metrale_stream* s, const char* file, int line) {
  metrale::core::StreamObj* st = stream_of(s);  // a bad stream frees nothing
  if (pool_ && free_pooled(ptr, st, file, line)) return;
  free_impl(ptr, pool_ ? st : nullptr, file, line);
}
