// Freed padded pool blocks waiting for their red-zone check (the "pending
// list"). A padded block freed to the pool is not reused at once: it waits
// here, off the ledger, still handed out as far as the pool knows, until a
// batch pass (pad_verify_ops.cpp) reads the tails of every waiting block in
// one backend pass, reports the ones that were overwritten (an overrun by
// an allocation freed before any scan, which a scan of live pads never
// sees) and gives the intact ones back to the pool with their pattern
// recorded (Block::pattern), so that reusing them needs no fill.
//
// A pass runs when the list reaches its bounds (count or bytes: see
// Limits), and before a scan, a trim, an out-of-memory retry and teardown.
// This class is the bookkeeping only (thread-safe: one mutex, the ledger's
// when the context passes it, so that a free queues its block under the
// lock it already holds); the context reads, reports and releases.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_set>
#include <utility>
#include <vector>

#include "core/fast_mutex.hpp"
#include "core/ledger.hpp"
#include "core/pool/pad_owners.hpp"

namespace metrale::core {

struct PendingPad {
  PendingPad() = default;
  // A freed block as its free queues it: built in place, each field written
  // once (a default entry then filled in zeroed all 136 bytes first).
  PendingPad(DevPtr p, const LedgerEntry& e, uint32_t site, uint64_t on, size_t to, size_t held)
      : ptr(p), entry(e), free_site(site), stream(on), check_from(e.bytes), check_to(to),
        held_bytes(held) {}
  DevPtr ptr = 0;
  LedgerEntry entry;       // as it left the ledger (bytes, pad, seq, site, tag, block)
  uint32_t free_site = 0;  // a ledger site id
  uint64_t stream = 0;     // backend stream the block is freed on (work ordered before)
  // The range the pass reads, from the block's start: the pattern range the
  // allocation left after its buffer (the pad and the slack filled with it);
  // intact, the block goes back to the pool with it as its record.
  size_t check_from = 0;
  size_t check_to = 0;
  size_t held_bytes = 0;   // the block's size (what the pool cannot reuse meanwhile)
  size_t result = 0;       // a stream-ordered pass: the index of its pad's result
  // METRALE_REDZONE_REUSE: the block's earlier owners since its pad's last
  // check (`entry` is the last one): earlier_count of them, logged at
  // earlier_at in the context's OwnerLog (core/owner_log.hpp).
  uint64_t earlier_at = 0;
  uint32_t earlier_count = 0;
};

class PadVerifyQueue {
 public:
  // shared: the mutex guarding the list (nullptr: its own).
  explicit PadVerifyQueue(FastMutex* shared = nullptr) : mutex_(shared != nullptr ? *shared : own_) {}
  struct Limits {
    size_t count = 256;                    // METRALE_REDZONE_VERIFY_BATCH
    size_t bytes = size_t{1} << 30;        // METRALE_REDZONE_VERIFY_BYTES
    bool ordered = true;                   // METRALE_REDZONE_VERIFY_ORDERED (0|1)
    size_t reuse = 1;                      // METRALE_REDZONE_REUSE: owners per check
  };
  // The defaults with METRALE_REDZONE_VERIFY_BATCH / _BYTES / _ORDERED and
  // METRALE_REDZONE_REUSE (1 .. PadOwners::kMax) applied; INVALID_ARGUMENT
  // (metrale::Error) naming a malformed variable. 0 for either of the first
  // two means 1: every free is checked at once; 0 for the last means 1.
  static Limits limits_from_env();

  void set_limits(Limits l) { limits_ = l; }
  // Adding an entry, with the list's mutex held by the caller, in two
  // steps so that the caller fills it in place (no copy of a whole
  // PendingPad per free): emplace_held makes room (with PendingPad's
  // arguments, if any) and may throw (nothing added then); commit_held counts the entry emplaced last, true when a
  // bound is met (the caller runs a pass).
  template <class... Args>
  PendingPad& emplace_held(Args&&... args) {
    return held_.emplace_back(std::forward<Args>(args)...);
  }
  bool commit_held() {
    bytes_ += held_.back().held_bytes;
    return held_.size() >= limits_.count || bytes_ >= limits_.bytes;
  }
  // Everything waiting, oldest first; the list is empty after. recycle()
  // gives the vector back when done, so its storage serves the next batch
  // (no allocation per batch in the steady loop).
  std::vector<PendingPad> take_all();
  void recycle(std::vector<PendingPad>&& done);
  // Puts back blocks a pass could not check now (their stream captures, or
  // this thread runs its work). All or none: short of memory, none is put.
  void put_back(const std::vector<PendingPad>& back);
  // Blocks freed on stream `gone` are ordered on `heir` from now on: `gone`
  // is being destroyed (after its work finished) and its value may come back.
  void retarget(uint64_t gone, uint64_t heir);
  size_t count() const;
  size_t bytes() const;
  // The same with the list's mutex held (read with other figures under it).
  size_t count_held() const { return held_.size(); }
  size_t bytes_held() const { return bytes_; }
  // Whether the list meets a bound now (commit_held's answer, read again).
  bool bound_met() const;

  // Allocations (by seq) whose pad a scan reported while they were live:
  // their free's check does not report the same overrun again. All or none
  // noted (a failure short of memory notes nothing).
  void note_reported(const std::vector<uint64_t>& seqs);
  // Whether any seq is noted (one relaxed load: the reuse path asks first).
  bool any_reported() const { return reported_count_.load(std::memory_order_relaxed) != 0; }
  // metrale_redzone_poison repaired the pads of these live allocations: a
  // later overrun there is new. Freed ones keep their mark (poison never
  // refills a freed pad, so its check would report the same bytes again).
  void forget_reported(const std::vector<uint64_t>& seqs);
  // Whether seq was reported by a scan; forgets it (its block is freed).
  bool take_reported(uint64_t seq);
  // The same without forgetting (a quarantined block, checked again later).
  bool was_reported(uint64_t seq);

  // Telemetry (metrale_pool_stats_t): relaxed counters.
  std::atomic<uint64_t> fills{0};          // tails or pads filled at allocation
  std::atomic<uint64_t> fills_skipped{0};  // pads already known to hold the pattern
  // The same, counted with the list's mutex held (the allocation fast path):
  // a load and a store, no locked instruction; readers add the two.
  std::atomic<uint64_t> fills_skipped_held{0};
  void count_fill_skipped_held() {
    fills_skipped_held.store(fills_skipped_held.load(std::memory_order_relaxed) + 1,
                             std::memory_order_relaxed);
  }
  std::atomic<uint64_t> passes{0};         // batch passes that read tails
  std::atomic<uint64_t> verified{0};       // blocks those passes checked
  std::atomic<uint64_t> dirty{0};          // blocks found overwritten
  std::atomic<uint64_t> unlisted{0};       // their reports past the scan's list bound

 private:
  FastMutex own_;
  FastMutex& mutex_;
  Limits limits_;
  size_t bytes_ = 0;
  std::vector<PendingPad> held_;
  std::vector<PendingPad> spare_;  // empty, with capacity
  std::mutex reported_mutex_;
  std::unordered_set<uint64_t> reported_;
  std::atomic<size_t> reported_count_{0};  // reported_.size(), for any_reported
};

}  // namespace metrale::core
