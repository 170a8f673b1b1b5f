// The allocation ledger: every live metrale_alloc / metrale_alloc_managed
// pointer with its size, red-zone pad, creation index and caller's site.
// Per-site totals are kept as entries come and go, so reports and the
// out-of-memory message cost O(sites), not O(allocations).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <deque>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "backend/backend.hpp"
#include "core/fast_mutex.hpp"
#include "core/ledger_table.hpp"
#include "core/tags.hpp"
#include "metrale_gpu.h"

namespace metrale::core {

namespace pool {
struct Block;
}

using DevPtr = uint64_t;

struct LedgerEntry {
  size_t bytes = 0;     // as asked
  size_t reserved = 0;  // as set aside by the backend (pad and rounding included)
  size_t pad = 0;       // red-zone bytes after the buffer
  uint64_t seq = 0;
  uint64_t order = 0;   // creation order of all ledger entries (ties of seq); set by record
  uint32_t site = 0;
  metrale_alloc_kind_t kind = METRALE_ALLOC_DEVICE;
  uint32_t pad_slot = 0;  // index in the pad table (when pad > 0); the ledger sets it
  // The allocating thread's tag (core/tags.hpp; 0 = none); set by record.
  uint32_t tag = 0;
  // The caching pool's block behind a pooled allocation (nullptr: a driver
  // allocation). The ledger is the pool's only table of handed-out blocks.
  pool::Block* block = nullptr;
};

// Who a pad belongs to: the address and the seq, unique for the life of the
// context, so a later allocation at the same address is not mistaken for it.
struct PadOwner {
  DevPtr ptr;
  uint64_t seq;
};

// What changed in the pad table since the last Ledger::pad_changes call
// (red-zone scans keep a copy of the table; see PadMirror).
struct PadChanges {
  size_t size = 0;      // pads in the table now
  bool whole = false;   // ranges/owners hold the whole table; slots is empty
  std::vector<uint32_t> slots;           // else: the slots written since,
  std::vector<backend::Range> ranges;    // with their range
  std::vector<PadOwner> owners;          // and owner now (slots < size only)
};

struct SiteUsage {
  const char* file;
  int line;
  uint64_t bytes;
  uint64_t count;
};

struct TagUsage {
  uint32_t tag;  // 0: untagged
  uint64_t bytes;
  uint64_t count;
};

class Ledger {
 public:
  Ledger();

  // Records ptr with the site file:line (copied once per distinct site).
  void record(DevPtr ptr, LedgerEntry entry, const char* file, int line);
  // Removes the entry keyed exactly by ptr; false (nothing changed) if none.
  bool take(DevPtr ptr, LedgerEntry* out);
  // The same with mutex() held by the caller: the caching pool shares it,
  // so a pooled allocation and its entry cost one lock.
  void record_locked(DevPtr ptr, const LedgerEntry& entry, const char* file, int line);
  bool take_locked(DevPtr ptr, LedgerEntry* out);
  // take_locked on an entry find_locked returned (no second lookup); out
  // may be nullptr when the caller copied what it needs.
  void take_found_locked(LedgerEntry* found, LedgerEntry* out) noexcept;
  FastMutex& mutex() const { return mutex_; }
  // record_locked in two steps, for the pool's fast path (pool_fast_path.cpp),
  // mutex() held. ready_locked does all that may throw (room in the table,
  // the site's id, the tag's totals) and returns the site and tag, so the
  // caller can take its block after it and know the record cannot fail.
  // commit_locked then records a padless entry for ptr in place: fill sets
  // its fields on a default entry (site and tag included), then the order
  // and the totals are set. It cannot throw (fill must not either).
  struct Ready {
    uint32_t site;
    uint32_t tag;
  };
  // padded: the entry will have a red-zone pad, so room in the pad table
  // is made too and commit_locked appends it without growing.
  Ready ready_locked(const char* file, int line, bool padded = false) {
    if (entries_.size() >= entries_.room()) [[unlikely]] grow_entries_locked();
    if (padded && (pads_.size() == pads_.capacity() ||
                   pad_owners_.size() == pad_owners_.capacity())) [[unlikely]] {
      grow_pads_locked();
    }
    const Ready r{site_id_locked(file, line), tags::current()};
    if (r.tag >= tag_totals_.size()) [[unlikely]] grow_tags_locked(r.tag);
    return r;
  }
  // An entry with a pad needs ready_locked(..., true) first.
  template <class Fill>
  void commit_locked(DevPtr ptr, Fill&& fill) noexcept {
    // Room was reserved: no growth. A pointer recorded twice (a backend
    // handing out live memory) keeps the newer entry, as before.
    LedgerEntry* slot = entries_.upsert_reserved(ptr);
    *slot = LedgerEntry{};
    fill(*slot);
    slot->order = next_order_++;
    if (slot->pad > 0) append_pad_locked(ptr, slot);  // room reserved: no throw
    count_locked(*slot, true);
  }
  // The live entry keyed by ptr, or nullptr (mutex() held). Valid until the
  // next record or take.
  LedgerEntry* find_locked(DevPtr ptr) { return entries_.get(ptr); }
  // Forgets a padless entry find_locked returned, totals updated.
  void forget_padless_locked(LedgerEntry* e) noexcept {
    count_locked(*e, false);
    entries_.erase_value(e);
  }
  // take_found_locked(e, nullptr) of a padded entry, inline for the padded
  // fast free (the call was ~20 instructions of its ~80, r27).
  [[gnu::always_inline]] void forget_padded_locked(LedgerEntry* e) noexcept {
    count_locked(*e, false);
    drop_pad_locked(e->pad_slot);
    entries_.erase_value(e);
  }
  // Undoes take(ptr) after the backend refused to free ptr: the entry goes
  // back with its site, seq and totals, and its pad back into the slot it
  // had, so the pad table is as before when nothing happened in between.
  void restore(DevPtr ptr, const LedgerEntry& entry);
  void restore_locked(DevPtr ptr, const LedgerEntry& entry);  // mutex() held
  // The entry whose [ptr, ptr+bytes) holds p; O(n), for error paths.
  bool find_containing(DevPtr p, DevPtr* base, LedgerEntry* out) const;

  // The id of site file:line (copied once), for records kept elsewhere.
  uint32_t intern_site(const char* file, int line);
  // The same with mutex() already held by the caller.
  uint32_t intern_site_held(const char* file, int line) { return site_id_locked(file, line); }
  const char* site_file(uint32_t site) const;
  int site_line(uint32_t site) const;

  size_t live_bytes() const;
  size_t live_count() const;
  size_t slack_bytes() const;

  // Live entries ordered by seq, oldest first.
  std::vector<std::pair<DevPtr, LedgerEntry>> by_seq() const;
  // The entry keyed exactly by ptr; false when it is not live.
  bool lookup(DevPtr ptr, LedgerEntry* out) const;
  // Runs fn(const LedgerEntry&) on the live entry keyed by ptr with the
  // ledger locked, so no free can take it meanwhile; false when not live.
  // fn must not call back into the ledger.
  template <class F>
  bool with_entry(DevPtr ptr, F&& fn) const {
    std::lock_guard<FastMutex> lock(mutex_);
    auto it = entries_.find(ptr);
    if (it == entries_.end()) return false;
    fn(it->second);
    return true;
  }
  // Every live red-zone pad and the allocation it follows, in no order: a
  // flat copy, so a scan costs no walk or sort of the ledger.
  void pads(std::vector<backend::Range>* pads, std::vector<DevPtr>* owners) const;
  // The same, with each owner's seq (red-zone scan: see ScanFence).
  void pads(std::vector<backend::Range>* pads, std::vector<PadOwner>* owners) const;
  size_t pad_count() const;
  // The pad table's changes since the previous call, for the one copy of the
  // table that red-zone scans keep (PadMirror; one consumer per ledger). The
  // whole table when `whole` is asked, on the first call, or when too many
  // slots changed to be worth listing (more than half the table). Slots that
  // lie past the current size are left out: the table shrank over them.
  // Clears the record. Thread safe (ledger lock, O(changes) or O(table)).
  void pad_changes(bool whole, PadChanges* out);
  // The entry keyed by ptr when it is still the allocation with this seq.
  bool lookup_seq(DevPtr ptr, uint64_t seq, LedgerEntry* out) const;
  // The pads of live allocations whose seq lies in [lo, hi), each with its
  // seq and whether its block still holds bytes of earlier owners whose pad
  // was never checked (METRALE_REDZONE_REUSE: the pad is shared with them).
  struct SeqPad {
    backend::Range zone;
    uint64_t seq;
    bool earlier_unchecked;
  };
  std::vector<SeqPad> pads_with_seq(uint64_t lo, uint64_t hi) const;
  // Sites holding live memory, most bytes first.
  std::vector<SiteUsage> sites_by_bytes() const;
  // Tags holding live memory (tag 0: untagged), most bytes first.
  std::vector<TagUsage> tags_by_bytes() const;
  // The tag of the live entry keyed by ptr; false when it is not live.
  bool tag_of(DevPtr ptr, uint32_t* tag) const;

 private:
  struct Site {
    std::string file;
    int line;
    uint64_t live_bytes = 0;
    uint64_t live_count = 0;
  };
  struct SiteKey {
    std::string_view file;
    int line;
    bool operator==(const SiteKey& o) const { return line == o.line && file == o.file; }
  };
  struct SiteKeyHash {
    size_t operator()(const SiteKey& k) const {
      return std::hash<std::string_view>()(k.file) ^ (static_cast<size_t>(k.line) * 0x9e3779b97f4a7c15ull);
    }
  };

  // The site cache's hit inline (the text compared: a caller reusing a
  // buffer for another name still gets the right site); a miss interns.
  uint32_t site_id_locked(const char* file, int line) {
    const size_t slot =
        (reinterpret_cast<uintptr_t>(file) >> 3 ^ static_cast<size_t>(line) * 31) %
        kSiteCacheSlots;
    const SiteCacheSlot& c = site_cache_[slot];
    if (c.file == file && c.line == line && std::strcmp(file, c.text) == 0) return c.id;
    return site_id_miss_locked(file, line, slot);
  }
  uint32_t site_id_miss_locked(const char* file, int line, size_t slot);
  // Room for one more entry (ready_locked), and a new tag's totals.
  void grow_entries_locked();
  void grow_pads_locked();
  void grow_tags_locked(uint32_t tag);
  // Site, tag, live and slack totals move together with the entries; the
  // tag's slot exists (ready_locked grows the table on a tag's first entry).
  // Unsigned wrap-around makes the remove the same adds of negated values.
  // Always inline: with the padded free's copy beside the padless one GCC
  // made it a call, +7 Ir on the padless pair (r27).
  [[gnu::always_inline]] void count_locked(const LedgerEntry& e, bool add) noexcept {
    Site& site = *site_at_[e.site];
    TagTotal& tag = tag_totals_[e.tag];
    const uint64_t n = add ? uint64_t{1} : ~uint64_t{0};
    const uint64_t bytes = add ? uint64_t{e.bytes} : uint64_t{0} - e.bytes;
    const uint64_t slack = e.reserved - e.bytes - e.pad;
    tag.bytes += bytes;
    tag.count += n;
    site.live_bytes += bytes;
    site.live_count += n;
    live_bytes_ += bytes;
    slack_bytes_ += add ? slack : uint64_t{0} - slack;
  }
  // The pad in `slot` leaves the table: the last one takes its place.
  void drop_pad_locked(uint32_t slot) noexcept {
    if (slot + 1 != pads_.size()) move_last_pad_locked(slot);
    pads_.pop_back();
    pad_owners_.pop_back();
  }
  void move_last_pad_locked(uint32_t slot) noexcept;
  // Inline for the padded allocation (room reserved there: no throw).
  void append_pad_locked(DevPtr ptr, LedgerEntry* e) {
    e->pad_slot = static_cast<uint32_t>(pads_.size());
    pads_.push_back(backend::Range{ptr + e->bytes, e->pad});
    pad_owners_.push_back(PadOwner{ptr, e->seq});
    mark_pad_locked(e->pad_slot);
  }
  // Records that pad slot `slot` was written (for pad_changes). Never throws:
  // without memory to list it, the next pad_changes answers the whole table.
  void mark_pad_locked(uint32_t slot) noexcept {
    if (!pad_all_dirty_) mark_pad_listed_locked(slot);
  }
  void mark_pad_listed_locked(uint32_t slot) noexcept;
  uint32_t site_id_by_text(const char* file, int line);

  // Recent (file pointer, line) pairs; a hit is confirmed by comparing the
  // text, so a caller reusing a buffer for another name is still right.
  struct SiteCacheSlot {
    const char* file = nullptr;
    const char* text = nullptr;  // the interned copy (sites_[id].file), compared
    int line = 0;
    uint32_t id = 0;
  };
  static constexpr size_t kSiteCacheSlots = 64;

  mutable FastMutex mutex_;
  SiteCacheSlot site_cache_[kSiteCacheSlots];
  // Flat, open addressing (ledger_table.hpp): no node per allocation.
  LedgerTable<LedgerEntry> entries_;
  // The pad table, dense: a freed slot takes the last one's place.
  std::vector<backend::Range> pads_;
  std::vector<PadOwner> pad_owners_;  // beside pads_: owner and its seq
  // Slots written since the last pad_changes, each listed once (flag per
  // slot). While pad_all_dirty_ is set nothing is listed: the next
  // pad_changes copies the whole table anyway (set until the first call, so
  // a ledger nobody scans pays one flag test per pad change).
  std::vector<uint32_t> pad_dirty_;
  std::vector<uint8_t> pad_dirty_flag_;
  bool pad_all_dirty_ = true;
  std::deque<Site> sites_;  // deque: a Site's file string never moves
  std::vector<Site*> site_at_;  // sites_[id] in one load (a deque index costs a division)
  // Live bytes and count per tag id (index 0: untagged); grown on first use.
  struct TagTotal {
    uint64_t bytes = 0, count = 0;
  };
  std::vector<TagTotal> tag_totals_;
  std::unordered_map<SiteKey, uint32_t, SiteKeyHash> site_ids_;
  uint64_t next_order_ = 0;  // LedgerEntry::order of the next record
  size_t live_bytes_ = 0;
  size_t slack_bytes_ = 0;
};

}  // namespace metrale::core
