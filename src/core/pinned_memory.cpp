// Pinned host memory: allocated (through the pinned pool, pinned_cache.hpp)
// or registered, the registry of what this context pinned, and the
// questions "is this pinned?" and "what is its device address?".
//
// With the pool on, a block the caller frees stays page-locked in the cache.
// To every question it is gone as before: off the registry and the bounds
// index at free, hidden (from every context of the process) from the driver
// fallback of host_is_pinned / host_device_pointer while cached, and put
// back on both when handed out again. A stale pointer into a cached block is therefore
// pageable memory to the copy paths (correct, just slower), never a crash.
#include <vector>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::fail;
using metrale::core::hex;
using metrale::core::human_bytes;
using metrale::core::PinnedCache;
using metrale::core::PinKind;

namespace {

constexpr size_t kLargePinned = 32ull * 1024 * 1024;

}  // namespace

void* metrale_context::host_alloc_pinned(size_t bytes) {
  fault_.check();
  // A hit costs no backend call; a miss allocates the whole size class so
  // the block can serve any request of its class later.
  void* p = pinned_cache_.take(bytes);
  const bool reused = p != nullptr;
  if (!reused) p = fresh_pinned_block(bytes);
  bool registered = false;
  try {
    if (!reused) pinned_cache_.adopt(p, bytes);
    pinned_.add(p, bytes, PinKind::Allocated);
    registered = true;
    if (bounds_) {
      DevPtr d = device([&] { return backend_->host_device_pointer(p); });
      bounds_->add(d, {bytes, "pinned host memory", 0});
    }
  } catch (...) {
    if (registered) pinned_.remove(p, PinKind::Allocated);
    // Back to the cache when it takes the block, else to the backend.
    std::vector<PinnedCache::Block> evicted;
    if (!pinned_cache_.put(p, &evicted)) {
      try {
        backend_->host_free_pinned(p);
      } catch (...) {
        // The first error is the one worth reporting.
      }
    }
    free_pinned_blocks(evicted);
    throw;
  }
  if (bytes >= kLargePinned && !reused) {
    metrale::core::log().debug("host_alloc_pinned {}", human_bytes(bytes));
  }
  return p;
}

// Out of pinned memory while the pool caches some: give the cache back and
// try once more (page-locked memory is what the cache holds). Only for a
// size the pool itself would cache: a request past the budget (a huge or
// absurd size) fails without emptying the cache of its recurring sizes.
void* metrale_context::fresh_pinned_block(size_t bytes) {
  const size_t block = pinned_cache_.block_bytes(bytes);
  try {
    return device([&] { return backend_->host_alloc_pinned(block); });
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY || !pinned_cache_.cacheable(bytes) ||
        pinned_pool_trim(0) == 0) {
      throw;
    }
  }
  return device([&] { return backend_->host_alloc_pinned(block); });
}

void metrale_context::host_free_pinned(void* ptr) {
  fault_.check();
  if (ptr == nullptr) return;
  // Off the registry first: of two threads freeing ptr exactly one gets
  // past here, and a second free is NOT_FOUND whether or not it is cached.
  pinned_.remove(ptr, PinKind::Allocated);
  if (bounds_) {
    try {
      bounds_->remove(backend_->host_device_pointer(ptr));
    } catch (...) {
      // Without a mapping there is nothing in the index to remove.
    }
  }
  std::vector<PinnedCache::Block> evicted;
  if (!pinned_cache_.put(ptr, &evicted)) device([&] { backend_->host_free_pinned(ptr); });
  free_pinned_blocks(evicted);
}

size_t metrale_context::pinned_pool_trim(size_t keep_bytes) {
  const auto blocks = pinned_cache_.trim(keep_bytes);
  const size_t released = free_pinned_blocks(blocks);
  if (!blocks.empty()) {
    metrale::core::log().debug("pinned pool: trimmed to {}: freed {} ({})", human_bytes(keep_bytes),
                               metrale::core::plural(blocks.size(), "cached block"),
                               human_bytes(released));
  }
  return released;
}

size_t metrale_context::free_pinned_blocks(const std::vector<PinnedCache::Block>& blocks) noexcept {
  size_t released = 0;
  for (const auto& b : blocks) {
    try {
      device([&] { backend_->host_free_pinned(b.ptr); });
      released += b.bytes;
    } catch (const std::exception& ex) {
      metrale::core::log().debug("freeing cached pinned block {} ({}) failed: {}",
                                 hex(reinterpret_cast<uintptr_t>(b.ptr)), human_bytes(b.bytes),
                                 ex.what());
    } catch (...) {
      metrale::core::log().debug("freeing cached pinned block {} failed",
                                 hex(reinterpret_cast<uintptr_t>(b.ptr)));
    }
  }
  return released;
}

void metrale_context::host_register(void* ptr, size_t bytes) {
  fault_.check();
  if (PinnedCache::hidden_anywhere(ptr, bytes)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host range " + hex(reinterpret_cast<uintptr_t>(ptr)) + " (" + std::to_string(bytes) +
             " bytes) overlaps memory the pinned pool keeps page-locked: a block freed by "
             "metrale_host_free_pinned and cached for reuse (a stale pointer), or the slack "
             "past the bytes asked of a live metrale_host_alloc_pinned block");
  }
  // Reserve the range first, so two threads cannot register overlapping ranges.
  pinned_.add(ptr, bytes, PinKind::Registered);
  try {
    device([&] { backend_->host_register(ptr, bytes); });
    if (bounds_) {
      DevPtr d = device([&] { return backend_->host_device_pointer(ptr); });
      bounds_->add(d, {bytes, "registered host memory", 0});
    }
  } catch (...) {
    pinned_.remove(ptr, PinKind::Registered);
    throw;
  }
}

void metrale_context::host_unregister(void* ptr) {
  fault_.check();
  pinned_.remove(ptr, PinKind::Registered);
  if (bounds_) {
    try {
      bounds_->remove(backend_->host_device_pointer(ptr));
    } catch (...) {
      // Without a mapping there is nothing in the index to remove.
    }
  }
  device([&] { backend_->host_unregister(ptr); });
}

// The registry knows what this context pinned; the driver knows the rest
// (another context, the CUDA runtime, PyTorch's pin_memory). Treating such
// memory as pageable would let copy_h2d_async return while the DMA still
// reads the caller's buffer. What a pinned pool of the process holds
// (cached blocks, class slack) is not asked of the driver: it answers as
// before pools existed.
bool metrale_context::host_is_pinned(const void* ptr, size_t bytes) const {
  metrale::core::PinnedRange r;
  if (pinned_.find(ptr, bytes, &r)) return true;
  if (PinnedCache::hidden_anywhere(ptr, bytes)) return false;
  return backend_->host_range_pinned(ptr, bytes);
}

metrale_context::DevPtr metrale_context::host_device_pointer(void* ptr) {
  fault_.check();
  metrale::core::PinnedRange r;
  if (pinned_.find(ptr, 1, &r)) {
    void* base = reinterpret_cast<void*>(r.base);
    DevPtr d = device([&] { return backend_->host_device_pointer(base); });
    return d + (reinterpret_cast<uintptr_t>(ptr) - r.base);
  }
  if (PinnedCache::hidden_anywhere(ptr, 1)) {
    fail(METRALE_ERROR_NOT_FOUND,
         hex(reinterpret_cast<uintptr_t>(ptr)) +
             " is not in pinned host memory (freed by metrale_host_free_pinned, or past the "
             "bytes asked of it)");
  }
  if (!device([&] { return backend_->host_range_pinned(ptr, 1); })) {
    fail(METRALE_ERROR_NOT_FOUND,
         hex(reinterpret_cast<uintptr_t>(ptr)) +
             " is not in pinned host memory (neither this context nor, as the driver says, "
             "anyone else in the process pinned it)");
  }
  // Pinned elsewhere: the backend asks the driver for that very address.
  return device([&] { return backend_->host_device_pointer(ptr); });
}
