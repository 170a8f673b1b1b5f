// The freed-memory quarantine: blocks freed while red zones are on are
// filled with METRALE_QUARANTINE_PATTERN and held back, oldest first out,
// within a byte budget, so that a kernel writing through a stale pointer
// writes into memory nobody owns and a scan can name who allocated and who
// freed it. This class is the bookkeeping only (thread-safe, one mutex);
// the context fills, releases and scans.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <list>
#include <mutex>
#include <vector>

#include "core/ledger.hpp"

namespace metrale::core {

struct QuarantinedBlock {
  DevPtr ptr = 0;
  LedgerEntry entry;        // as it left the ledger (bytes, pad, seq, site, block)
  uint32_t free_site = 0;   // a ledger site id
  uint64_t stream = 0;      // backend stream the block is released on later
  uint64_t serial = 0;      // admission order: a scan's snapshot names blocks by it
  // Work queued before the free on other streams (record_stream, the
  // block's own stream after a free on another) may still use the block
  // (rule 9): it is filled only once the events recorded there at the free
  // (waits, the quarantine's to destroy) have completed. Until then its
  // buffer holds no pattern and is not checked. Unfilled with no waits: a
  // stream that must be waited for was capturing (an event there would
  // join the graph), so it is never filled.
  bool filled = true;
  std::vector<uint64_t> waits;
  bool waiting() const { return !filled && !waits.empty(); }
  size_t span() const { return entry.bytes + entry.pad; }
  // What the quarantine fills and watches: the buffer (the pad is the
  // red-zone checks').
  size_t body() const { return entry.bytes; }
};

// The quarantine's blocks travel in list nodes: the node of a block to hold
// is made before its fill is queued, so that holding it allocates nothing
// (a filled block must never be left outside both the quarantine and the
// pool: quarantine_ops.cpp).
using QuarantineList = std::list<QuarantinedBlock>;

class Quarantine {
 public:
  explicit Quarantine(size_t budget) : budget_(budget) {}
  // Blocks larger than the budget are never admitted.
  bool fits(size_t span) const { return span <= budget_; }
  // Holds the blocks of `blocks` (one, from a free); returns the blocks
  // pushed out to stay within the budget, oldest first, which the caller
  // now releases. Moves nodes only: never fails.
  QuarantineList admit(QuarantineList blocks) noexcept;
  // A copy of what is held, oldest first.
  std::vector<QuarantinedBlock> snapshot() const;
  // The held blocks that wait for events and for which ready(q) says the
  // events have completed (asked under the lock, so never about a block
  // pushed out and released meanwhile), as copies, oldest first. Their fill
  // is the caller's, outside this lock (on the host backend a fill waits
  // for a host kernel on its stream, which may itself free into here).
  template <class Ready>
  std::vector<QuarantinedBlock> ready_to_fill(Ready&& ready) {
    std::vector<QuarantinedBlock> out;
    if (waiting_.load(std::memory_order_acquire) == 0) return out;
    std::lock_guard<std::mutex> lock(mutex_);
    for (const QuarantinedBlock& q : held_) {
      if (q.waiting() && ready(q)) out.push_back(q);
    }
    return out;
  }
  // Marks the block with this serial filled, its waits gone; false (nothing
  // changed) when it was pushed out meanwhile: its release then destroys
  // the waits, and the caller must not.
  bool mark_filled(uint64_t serial);
  // Whether the block with this serial is still held.
  bool holds(uint64_t serial) const;
  // Blocks to be released on stream `gone` are released on `heir` instead:
  // `gone` is being destroyed and a handle value may be issued again.
  void retarget(uint64_t gone, uint64_t heir);
  // Everything, for teardown or an out-of-memory retry.
  QuarantineList drain() noexcept;
  size_t bytes() const;

 private:
  mutable std::mutex mutex_;
  size_t budget_;
  size_t bytes_ = 0;
  uint64_t next_serial_ = 1;
  std::atomic<size_t> waiting_{0};  // held blocks with waiting(): a poll's early out
  QuarantineList held_;  // oldest (lowest serial) first
};

}  // namespace metrale::core
