// alloc / free on the ledger, and arenas (pinned host memory: pinned_memory.cpp).
#include <limits>

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

metrale_context::DevPtr metrale_context::alloc(size_t bytes, const char* file, int line,
                                               metrale_alloc_kind_t kind) {
  fault_.check();
  if (file == nullptr) file = "<unknown>";
  const bool managed = kind == METRALE_ALLOC_MANAGED;
  // The seed's ALLOC_SEQ: every metrale_alloc call takes the next index
  // (taken before the backend call, as the seed does), and red zones and
  // METRALE_REDZONE_MIN_IDX count in it. Managed memory never has a pad and
  // takes no index: its seq is the one the next device allocation gets, so
  // mixing managed allocations in does not move which buffer MIN_IDX picks.
  uint64_t seq = managed ? seq_.load(std::memory_order_relaxed)
                         : seq_.fetch_add(1, std::memory_order_relaxed);
  size_t pad = (!managed && seq >= opts_.redzone_min_index) ? opts_.redzone_bytes : 0;
  if (bytes > std::numeric_limits<size_t>::max() - pad) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, "out of device memory: asked " + std::to_string(bytes) +
                                          " bytes plus a " + std::to_string(pad) +
                                          "-byte red zone at " +
                                          metrale::core::site_text(file, line) +
                                          ", more than the address space holds");
  }
  size_t reserved = 0;
  DevPtr ptr = 0;
  try {
    ptr = device([&] {
      return managed ? backend_->mem_alloc_managed(bytes, &reserved)
                     : backend_->mem_alloc(bytes + pad, &reserved);
    });
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) throw;
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
               human_bytes(sites[i].bytes) + " in " + metrale::core::plural(sites[i].count, "allocation") +
               ")";
      }
    }
    msg += "; driver: " + std::string(e.what());
    throw Error(METRALE_ERROR_OUT_OF_MEMORY, msg, e.driver_code());
  }
  if (reserved < bytes + pad) reserved = bytes + pad;  // a backend that reports less
  if (pad > 0) {
    metrale::backend::Range zone{ptr + bytes, pad};
    try {
      device([&] { backend_->pattern_fill(&zone, 1, METRALE_REDZONE_PATTERN); });
    } catch (...) {
      try {
        backend_->mem_free(ptr);
      } catch (...) {
        // The fill's error is the one the caller needs.
      }
      throw;
    }
  }
  metrale::core::LedgerEntry entry;
  entry.bytes = bytes;
  entry.reserved = reserved;
  entry.pad = pad;
  entry.seq = seq;
  entry.order = order_.fetch_add(1, std::memory_order_relaxed);
  entry.kind = kind;
  // Bounds first: once on the ledger a concurrent sweep may take the entry,
  // and its bounds removal must find something to remove.
  if (bounds_) bounds_->add(ptr, {bytes, file, line});
  ledger_.record(ptr, entry, file, line);
  metrale::core::Counters::bump(counters_.allocs);
  metrale::core::Counters::bump(counters_.alloc_bytes, bytes);
  if (bytes >= kLargeAlloc) {
    metrale::core::log().debug("alloc {} at {}:{} (device ptr {})", human_bytes(bytes), file, line,
                               hex(ptr));
  }
  return ptr;
}

void metrale_context::free(DevPtr ptr) {
  fault_.check();
  if (ptr == 0) return;
  metrale::core::LedgerEntry e;
  // Off the ledger first: of two threads freeing ptr at once exactly one
  // takes it, and only that one calls the backend (never a double free).
  if (!ledger_.take(ptr, &e)) {
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
  metrale::core::Region region{};
  const bool bounded = bounds_ && bounds_->take(ptr, &region);
  try {
    release_memory(ptr, e);
  } catch (...) {
    // The driver still holds the memory, so no other allocation can have
    // its address: put the entry, its pad and its bounds back as they were.
    // Counters move only on success.
    ledger_.restore(ptr, e);
    if (bounded) bounds_->add(ptr, region);
    throw;
  }
  metrale::core::Counters::bump(counters_.frees);
  metrale::core::Counters::bump(counters_.free_bytes, e.bytes);
}

void metrale_context::release_memory(DevPtr ptr, const metrale::core::LedgerEntry& e) {
  // Only pads are read by a red-zone pass; a padless block goes back now.
  if (e.pad > 0 && scan_fence_.hold(ptr)) return;
  device([&] { backend_->mem_free(ptr); });
}

void metrale_context::free_held(const std::vector<DevPtr>& held) noexcept {
  for (DevPtr ptr : held) {
    try {
      device([&] { backend_->mem_free(ptr); });
    } catch (const std::exception& ex) {
      // The entry left the ledger at the free; a lost context fails here too.
      metrale::core::log().debug("freeing {} held back for a red-zone pass failed: {}", hex(ptr),
                                 ex.what());
    } catch (...) {
      metrale::core::log().debug("freeing {} held back for a red-zone pass failed", hex(ptr));
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
