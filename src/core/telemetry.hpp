// Counters (relaxed atomics) and the launch trace and kernel audit rings;
// kernel timing lives in kernel_timer.hpp.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "core/sharded_counter.hpp"
#include "metrale_gpu.h"

namespace metrale::core {

struct Counters {
  // Bumped by every launch, from any thread: per-thread lines, no locked
  // instruction (sharded_counter.hpp).
  ShardedCounter launches;
  alignas(64) std::atomic<uint64_t> graph_launches{0}, stream_syncs{0};
  std::atomic<uint64_t> h2d_copies{0}, h2d_bytes{0}, d2h_copies{0}, d2h_bytes{0};
  std::atomic<uint64_t> d2d_copies{0}, d2d_bytes{0}, memsets{0}, memset_bytes{0};
  std::atomic<uint64_t> allocs{0}, alloc_bytes{0}, frees{0}, free_bytes{0};
  std::atomic<uint64_t> kernel_lookups{0}, kernel_lookup_misses{0}, pinned_source_waits{0};
  std::atomic<uint64_t> timings_dropped{0};

  static void bump(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.fetch_add(n, std::memory_order_relaxed);
  }
  // For counters whose every writer holds one lock (allocs, alloc_bytes,
  // frees and free_bytes: the ledger's): no locked instruction, which was a
  // third of a pooled alloc+free.
  static void bump_held(std::atomic<uint64_t>& c, uint64_t n = 1) {
    c.store(c.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
  }
  void snapshot(metrale_counters_t* out) const;
  void reset();
};

// Logs a ring's first dropped entry (telemetry.cpp); never throws.
void log_ring_drop(const char* what) noexcept;

// A bounded ring keeping the newest `capacity` entries. It grows as entries
// come (a large capacity costs nothing until used).
template <class T>
class Ring {
 public:
  Ring(const char* what, size_t capacity) : what_(what), capacity_(capacity) {}

  // Keeps e, the oldest giving way once full. Never throws: the call an
  // entry records has acted already (rule 1), so an entry that finds no
  // memory to grow the ring is dropped, counted, and the first drop logged.
  void push(const T& e) noexcept {
    bool first_drop = false;
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (capacity_ == 0) return;
      if (items_.size() < capacity_) {
        try {
          items_.push_back(e);
        } catch (...) {
          first_drop = dropped_++ == 0;
        }
      } else {
        items_[head_] = e;
        head_ = (head_ + 1) % capacity_;
      }
    }
    if (first_drop) log_ring_drop(what_);
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mutex_);
    items_.clear();
    head_ = 0;
  }
  // Copies up to cap entries, oldest first; returns how many are held.
  size_t read(T* out, size_t cap) const {
    std::lock_guard<std::mutex> lock(mutex_);
    size_t n = items_.size();
    for (size_t i = 0; i < n && i < cap; ++i) out[i] = items_[(head_ + i) % n];
    return n;
  }

 private:
  const char* const what_;  // "launch trace", "kernel audit": for the log
  mutable std::mutex mutex_;
  size_t capacity_;
  uint64_t dropped_ = 0;  // entries push found no memory for
  std::vector<T> items_;
  size_t head_ = 0;  // the oldest entry once the ring is full
};

}  // namespace metrale::core
