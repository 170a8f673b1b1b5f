// A counter bumped by many threads on a hot path without a locked
// instruction: each thread adds to its own cache line (thread_slot.hpp) with
// a plain load and store, and a read sums the lines. A locked add on the
// launch path was half of the library's own time per launch, and after the
// driver's writes it also waits for them to drain. Exact: a line has one
// writer at a time. Reads are relaxed: a snapshot taken while others add
// may miss their latest adds, as with one atomic.
#pragma once

#include <atomic>
#include <cstdint>

#include "core/thread_slot.hpp"

namespace metrale::core {

class ShardedCounter {
 public:
  void add(uint64_t n = 1) noexcept {
    const uint32_t s = ThreadSlot::mine();
    if (s < ThreadSlot::kSlots) {
      std::atomic<uint64_t>& v = lines_[s].value;
      v.store(v.load(std::memory_order_relaxed) + n, std::memory_order_relaxed);
    } else {
      lines_[ThreadSlot::kShared].value.fetch_add(n, std::memory_order_relaxed);
    }
  }

  // The adds since the last reset().
  uint64_t load() const noexcept {
    const uint64_t base = base_.load(std::memory_order_acquire);
    const uint64_t total = sum();
    return total > base ? total - base : 0;
  }

  // Starts counting from 0 again. Adds racing with it count or not.
  void reset() noexcept { base_.store(sum(), std::memory_order_release); }

 private:
  uint64_t sum() const noexcept {
    uint64_t total = 0;
    for (const Line& l : lines_) total += l.value.load(std::memory_order_relaxed);
    return total;
  }

  struct alignas(64) Line {
    std::atomic<uint64_t> value{0};
  };
  Line lines_[ThreadSlot::kSlots + 1];  // the last: threads without a slot
  alignas(64) std::atomic<uint64_t> base_{0};
};

}  // namespace metrale::core
