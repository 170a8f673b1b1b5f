// alloc / free on the ledger, and arenas (pinned host memory: pinned_memory.cpp).
#include <limits>
#include <string>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::fail;
using metrale::core::hex;
using metrale::core::human_bytes;

namespace {

constexpr size_t kLargeAlloc = 32ull * 1024 * 1024;

}  // namespace

metrale_context::DevPtr metrale_context::alloc_unlogged(size_t bytes, const char* file, int line,
                                               metrale_alloc_kind_t kind, metrale_stream* s,
                                               bool wait_for_fill,
                                               metrale::core::EventLog::Ticket* tk) {
  fault_.check();
  if (file == nullptr) file = "<unknown>";
  metrale::core::StreamObj* st = stream_of(s);  // refused before a seq is used
  const bool managed = kind == METRALE_ALLOC_MANAGED;
  const bool pooled = pool_ != nullptr && !managed;
  // The seed's ALLOC_SEQ: every metrale_alloc call takes the next index
  // (taken before the backend call, as the seed does), and red zones and
  // METRALE_REDZONE_MIN_IDX count in it. Managed memory never has a pad and
  // takes no index: its seq is the one the next device allocation gets, so
  // mixing managed allocations in does not move which buffer MIN_IDX picks.
  // The index moves under the ledger's lock (one atomic operation less on
  // the pooled path, which holds that lock anyway).
  const bool cap = pooled && maybe_capturing(st);
  // An event log takes the general path below (where the ticket is taken).
  if (tk == nullptr && pooled && opts_.redzone_bytes == 0 && !bounds_ && !cap) {
    return alloc_pooled(bytes, kind, st, file, line);
  }
  // Red zones on: the same in one lock, a fill only when needed (pad_fast_path.cpp).
  if (tk == nullptr && pooled && !bounds_ && !cap) {
    return alloc_pooled_padded(bytes, kind, st, file, line, wait_for_fill);
  }
  uint64_t seq;
  {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    seq = seq_.load(std::memory_order_relaxed);
    if (!managed) seq_.store(seq + 1, std::memory_order_relaxed);
  }
  size_t pad = (!managed && seq >= opts_.redzone_min_index) ? opts_.redzone_bytes : 0;
  if (bytes > std::numeric_limits<size_t>::max() - pad) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, "out of device memory: asked " + std::to_string(bytes) +
                                          " bytes plus a " + std::to_string(pad) +
                                          "-byte red zone at " +
                                          metrale::core::site_text(file, line) +
                                          ", more than the address space holds");
  }
  metrale::core::LedgerEntry entry;
  entry.bytes = bytes;
  entry.pad = pad;
  entry.seq = seq;
  entry.kind = kind;
  size_t reserved = 0;
  DevPtr ptr = 0;
  metrale::core::pool::Block* block = nullptr;
  try {
    if (pooled) {
      try {
        block = device([&] { return pool_->allocate(bytes + pad, st->handle, cap); });
      } catch (const Error& e) {
        // Memory pressure: blocks waiting for their red-zone check go back
        // to the pool (checked), and the pool gets one more try.
        if (e.status() != METRALE_ERROR_OUT_OF_MEMORY || pad_verify_.count() == 0) throw;
        verify_freed_pads(true);
        block = device([&] { return pool_->allocate(bytes + pad, st->handle, cap); });
      }
      ptr = block->ptr;
      reserved = block->size;
      // Pad included: the library's own fill and scan kernels touch it.
      chunk_source_->block_handed_out(ptr, bytes + pad);
    } else {
      ptr = device([&] {
        return managed ? backend_->mem_alloc_managed(bytes, &reserved)
                       : backend_->mem_alloc(bytes + pad, &reserved);
      });
    }
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
    throw Error(METRALE_ERROR_OUT_OF_MEMORY, oom_message(bytes, file, line, managed, pooled, e),
                e.driver_code());
  }
  if (reserved < bytes + pad) reserved = bytes + pad;  // a backend that reports less
  // A failed fill or record gives the memory back: a failed call keeps
  // nothing (rule 1). Its own error is dropped: the caller needs the first.
  const auto give_back = [&]() noexcept {
    try {
      if (block != nullptr) {
        chunk_source_->block_returned(ptr);
        pool_->free(block);
      } else {
        backend_->mem_free(ptr);
      }
    } catch (...) {
      // The first error is the one the caller needs.
    }
  };
  if (pad > 0) {
    try {
      if (pooled) {
        prepare_pooled_pad(block, bytes, pad, st, cap, wait_for_fill);
      } else {
        metrale::backend::Range zone{ptr + bytes, pad};
        device([&] { backend_->pattern_fill(&zone, 1, METRALE_REDZONE_PATTERN); });
      }
    } catch (...) {
      give_back();
      throw;
    }
  }
  entry.reserved = reserved;
  entry.block = block;
  bool bounded = false;
  try {
    // Bounds first: once on the ledger a concurrent sweep may take the entry,
    // and its bounds removal must find something to remove.
    if (bounds_) {
      bounds_->add(ptr, {bytes, file, line});
      bounded = true;
    }
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    ledger_.record_locked(ptr, entry, file, line);  // throws: nothing recorded
    if (tk != nullptr) *tk = event_log_.ticket();
    count_alloc_held(bytes);
  } catch (...) {
    // Short of host memory for the bounds or the ledger entry: the memory
    // goes back, a failed call keeps nothing (rule 1).
    metrale::core::Region dropped{};
    if (bounded) bounds_->take(ptr, &dropped);
    give_back();
    throw;
  }
  // should_log first: the arguments are strings built before the call.
  if (bytes >= kLargeAlloc && metrale::core::log().should_log(spdlog::level::debug)) {
    metrale::core::log().debug("alloc {} at {}:{} (device ptr {})", human_bytes(bytes), file, line,
                               hex(ptr));
  }
  return ptr;
}

std::string metrale_context::oom_message(size_t bytes, const char* file, int line, bool managed,
                                         bool pooled, const Error& e) {
  size_t free_b = 0, total = 0;
  try {
    backend_->mem_info(&free_b, &total);
  } catch (...) {
    // The message goes out with zeros rather than not at all.
  }
  std::string msg = "out of " + std::string(managed ? "managed" : "device") + " memory: asked " +
                    std::to_string(bytes) + " bytes (" + human_bytes(bytes) + ") at " +
                    metrale::core::site_text(file, line) + "; device free " + human_bytes(free_b) +
                    " of " + metrale::core::gib(total);
  auto sites = ledger_.sites_by_bytes();
  if (!sites.empty()) {
    msg += "; most held by: ";
    for (size_t i = 0; i < sites.size() && i < 3; ++i) {
      if (i > 0) msg += ", ";
      msg += metrale::core::site_text(sites[i].file, sites[i].line) + " (" +
             human_bytes(sites[i].bytes) + " in " +
             metrale::core::plural(sites[i].count, "allocation") + ")";
    }
  }
  // The pool's own message names its cached and in-use bytes.
  msg += pooled ? "; " + std::string(e.what()) : "; driver: " + std::string(e.what());
  return msg;
}

void metrale_context::fill_pooled_pad(DevPtr pad, size_t bytes, metrale::core::StreamObj* st,
                                      bool cap, bool wait) {
  if (cap) {
    // Known-complete memory (see CachingPool::allocate): filled now, on the
    // red-zone stream, never recorded into the capture.
    metrale::backend::Range zone{pad, bytes};
    device([&] { backend_->pattern_fill(&zone, 1, METRALE_REDZONE_PATTERN); });
    return;
  }
  // On the block's stream: after the work of its previous owner there, and
  // before anything the new owner puts there.
  device([&] { backend_->memset_async(pad, METRALE_REDZONE_PATTERN, bytes, st->handle); });
  // metrale_alloc's memory may be used on any stream at once: the fill must
  // have finished. (Inside work of st itself the fill ran nested, at once.)
  if (wait && !backend_->in_stream_work(st->handle)) {
    device([&] { backend_->stream_synchronize(st->handle); });
  }
}

void metrale_context::refuse_free(DevPtr ptr) {
  metrale::core::LedgerEntry e;
  DevPtr base = 0;
  if (ledger_.find_containing(ptr, &base, &e)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         hex(ptr) + " is inside the allocation " + hex(base) + " (" + std::to_string(e.bytes) +
             " bytes) from " +
             metrale::core::site_text(ledger_.site_file(e.site), ledger_.site_line(e.site)) +
             "; free that pointer");
  }
  fail(METRALE_ERROR_NOT_FOUND, hex(ptr) + " is not a live allocation of this context "
                                           "(never allocated here, or already freed)");
}

void metrale_context::free_impl(DevPtr ptr, metrale::core::StreamObj* st, const char* file,
                                int line) {
  fault_.check();
  if (ptr == 0) return;
  // The event log's number: as the entry is taken, before the memory can move.
  metrale::core::EventLog::Ticket tk;
  metrale::core::LedgerEntry e;
  if (pool_ && !bounds_ && !quarantine_ &&
      captures_open_.load(std::memory_order_acquire) == 0) {
    // The common pooled case: the entry leaves and the block goes back to
    // the pool under one lock. Anything else (a pad, streams marked with
    // record_stream, a driver allocation) continues below, entry taken.
    bool taken = false, done = false, check = false;
    {
      std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
      taken = ledger_.take_locked(ptr, &e);
      if (taken) tk = event_log_.ticket();
      if (taken && e.block != nullptr && e.pad == 0 && e.block->uses.empty()) {
        chunk_source_->block_returned(ptr);
        try {
          pool_->free_held(e.block, st != nullptr ? st->handle : e.block->stream);
        } catch (...) {
          // Nothing was freed (the pool refuses before the block changes):
          // the entry goes back, as on the general path (rule 1).
          chunk_source_->block_handed_out(ptr, e.bytes);
          ledger_.restore_locked(ptr, e);
          throw;
        }
        count_free_held(e.bytes);
        done = true;
      } else if (taken && e.block != nullptr && e.pad > 0 &&
                 queue_freed_pad_held(ptr, e, st, file, line, &check)) {
        count_free_held(e.bytes);  // a padded block waits for its check (pad_fast_path.cpp)
        done = true;
      }
    }
    if (!taken) refuse_free(ptr);
    if (check) verify_freed_pads(false);
    if (done) return log_free(tk, e, ptr, st, file, line);
  } else if (!take_entry(ptr, &e, &tk)) {
    // Off the ledger first: of two threads freeing ptr at once exactly one
    // takes it, and only that one calls the backend (never a double free).
    refuse_free(ptr);
  }
  metrale::core::Region region{};
  const bool bounded = bounds_ && bounds_->take(ptr, &region);
  try {
    StreamHandle on = 0;
    if (e.block != nullptr) {
      on = st != nullptr ? st->handle : 0;
      // A pooled block freed on a capturing stream would be reused while the
      // graph, which may use it at every replay, is still to run.
      const bool cap = captures_open_.load(std::memory_order_acquire) != 0 &&
                       device([&] {
                         return backend_->stream_is_capturing(
                             on != 0 ? on : pool_->block_stream(e.block));
                       });
      if (cap) {
        // Handed out again only once the capture has closed (rule 9).
        defer_free(ptr, e, on != 0 ? on : pool_->block_stream(e.block), file, line);
        on = StreamHandle{~0ull};
      }
    }
    if (on != StreamHandle{~0ull} && e.block != nullptr && (e.pad > 0 || quarantine_takes(e)) &&
        captures_open_.load(std::memory_order_acquire) != 0 &&
        device([&] { return pool_->capturing_use_of(e.block); }) != 0) {
      // A padded or quarantined block reaches the pool later, from a list,
      // where the pool's own refusal would come too late for this call: the
      // same answer now, with nothing freed (as a padless block gets).
      fail(METRALE_ERROR_CAPTURE,
           "the block was marked as used on a stream that is capturing a graph "
           "(metrale_record_stream): its free would record an event into that graph; free it "
           "after the capture ends");
    }
    if (on == StreamHandle{~0ull}) {
      // deferred to the capture's end
    } else if (quarantine_takes(e)) {
      quarantine_block(ptr, e, on, file, line);
    } else {
      release_memory(ptr, e, on, file, line);
    }
  } catch (...) {
    // Nothing was freed (the driver or the pool still holds the memory, so
    // no other allocation can have its address): put the entry, its pad and
    // its bounds back as they were. Counters move only on success.
    ledger_.restore(ptr, e);
    if (bounded) bounds_->add(ptr, region);
    throw;
  }
  log_free(tk, e, ptr, st, file, line);
  std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
  count_free_held(e.bytes);
}

void metrale_context::release_memory(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                     StreamHandle on, const char* file, int line) {
  // Only pads are read by a red-zone pass; a padless block goes back now.
  if (e.pad > 0) {
    // A pooled one is checked first, in a batch (pad_verify_ops.cpp).
    if (hold_for_verify(ptr, e, on, file, line)) return;
    if (e.block != nullptr && on != 0) pool_->set_stream(e.block, on);  // freed on `on` later
    if (scan_fence_.hold(ptr, e.block)) return;
  }
  release_now(ptr, e, on);
}

void metrale_context::release_now(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                  StreamHandle on) {
  if (e.block != nullptr) {
    // Before the pool has it: after, another thread may hand it out again.
    chunk_source_->block_returned(ptr);
    try {
      device([&] {
        if (on != 0) {
          pool_->free_on(e.block, on);
        } else {
          pool_->free(e.block);
        }
      });
    } catch (...) {
      chunk_source_->block_handed_out(ptr, e.bytes + e.pad);  // still the caller's
      throw;
    }
    return;
  }
  device([&] { backend_->mem_free(ptr); });
}

void metrale_context::free_held(
    const std::vector<metrale::core::ScanFence::Released>& held) noexcept {
  for (const auto& h : held) {
    try {
      if (h.block != nullptr) {
        chunk_source_->block_returned(h.ptr);
        pool_->free(static_cast<metrale::core::pool::Block*>(h.block));
      } else {
        device([&] { backend_->mem_free(h.ptr); });
      }
    } catch (const std::exception& ex) {
      // The entry left the ledger at the free; a lost context fails here too.
      metrale::core::log().debug("freeing {} held back for a red-zone pass failed: {}",
                                 hex(h.ptr), ex.what());
    } catch (...) {
      metrale::core::log().debug("freeing {} held back for a red-zone pass failed", hex(h.ptr));
    }
  }
}

metrale_context::DevPtr metrale_context::alloc_arena(size_t bytes) {
  fault_.check();
  size_t reserved = 0;
  DevPtr ptr = device([&] { return backend_->mem_alloc(bytes, &reserved); });
  {
    std::lock_guard<std::mutex> lock(arenas_mutex_);
    arenas_[ptr] = bytes;
  }
  if (bounds_) bounds_->add(ptr, {bytes, "an arena (metrale_alloc_arena)", 0});
  return ptr;
}

void metrale_context::free_arena(DevPtr ptr) {
  fault_.check();
  if (ptr == 0) return;
  {
    std::lock_guard<std::mutex> lock(arenas_mutex_);
    auto it = arenas_.find(ptr);
    if (it == arenas_.end()) {
      fail(METRALE_ERROR_NOT_FOUND,
           hex(ptr) + " is not an arena of this context (never allocated by "
                      "metrale_alloc_arena here, or already freed)");
    }
    arenas_.erase(it);
  }
  if (bounds_) bounds_->remove(ptr);
  device([&] { backend_->mem_free(ptr); });
}
