// The red-zone scan's own copy of the ledger's pad table, kept between scans
// and brought up to date from the ledger's change record (Ledger::
// pad_changes), so a scan copies O(changes) instead of the whole table, and
// the backend (cuda: a device-side table) is told which slots changed.
//
// Exactness (rule 4): refresh() is called inside a ScanPass, so the copy is
// the table at one instant and every pad in it stays allocated until the pass
// closes; a slot's owner (address and seq) is that instant's, read from the
// copy, so a pad freed later is never blamed on whoever took its slot.
//
// One scan at a time uses the mirror: Lease::try_take() gets it or, when
// another scan (or this thread further up, from a log callback) holds it,
// answers false and that scan takes a snapshot of its own instead (the old
// way: no waiting, no deadlock). Memory: two arrays as long as the most pads
// the context had at a scan.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"
#include "core/ledger.hpp"

namespace metrale::core {

class PadMirror {
 public:
  // Exclusive use of the mirror for one scan, or nothing (never waits).
  class Lease {
   public:
    explicit Lease(PadMirror& m);
    ~Lease();
    Lease(const Lease&) = delete;
    Lease& operator=(const Lease&) = delete;
    bool held() const { return held_; }

   private:
    PadMirror& m_;
    bool held_ = false;
  };

  // Brings the copy up to the ledger's table as it is now (lease held, inside
  // a ScanPass). Throws bad_alloc; the next refresh then rebuilds it whole.
  void refresh(Ledger& ledger);

  size_t size() const { return ranges_.size(); }
  const backend::Range* ranges() const { return ranges_.data(); }
  const PadOwner& owner(size_t slot) const { return owners_[slot]; }
  // For the backend's table: the slots the last refresh changed, or whole()
  // when the backend must take the whole table (rebuilt here, or the
  // backend's previous call did not return normally).
  const std::vector<uint32_t>& changed() const { return changes_.slots; }
  bool whole() const { return send_whole_; }
  // Bracket the backend call: its table is known to match only after a
  // call that returned.
  void backend_begin() { backend_synced_ = false; }
  void backend_done() { backend_synced_ = true; }

 private:
  std::mutex mutex_;
  bool valid_ = false;           // ranges_/owners_ match the ledger's last pad_changes
  bool backend_synced_ = false;  // the backend's table matches ranges_ before refresh
  bool send_whole_ = true;
  std::vector<backend::Range> ranges_;
  std::vector<PadOwner> owners_;
  PadChanges changes_;
};

}  // namespace metrale::core
