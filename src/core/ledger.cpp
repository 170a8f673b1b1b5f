#include "core/ledger.hpp"

#include <algorithm>
#include <cstring>

#include "core/pool/block.hpp"
#include "core/tags.hpp"

namespace metrale::core {

Ledger::Ledger() { entries_.reserve(4096); }

uint32_t Ledger::site_id_miss_locked(const char* file, int line, size_t slot) {
  uint32_t id = site_id_by_text(file, line);
  site_cache_[slot] = SiteCacheSlot{file, site_at_[id]->file.c_str(), line, id};
  return id;
}

uint32_t Ledger::intern_site(const char* file, int line) {
  std::lock_guard<FastMutex> lock(mutex_);
  return site_id_locked(file, line);
}

uint32_t Ledger::site_id_by_text(const char* file, int line) {
  auto it = site_ids_.find(SiteKey{file, line});
  if (it != site_ids_.end()) return it->second;
  site_at_.reserve(sites_.size() + 1);  // the push below cannot throw then
  sites_.push_back(Site{file, line});
  site_at_.push_back(&sites_.back());
  uint32_t id = static_cast<uint32_t>(sites_.size() - 1);
  site_ids_.emplace(SiteKey{sites_.back().file, line}, id);
  return id;
}

void Ledger::grow_pads_locked() {
  // Both tables grow together, so one capacity check covers both pushes.
  const size_t want = pads_.capacity() < 64 ? 64 : pads_.capacity() * 2;
  pads_.reserve(want);
  pad_owners_.reserve(want);
}

void Ledger::mark_pad_listed_locked(uint32_t slot) noexcept {
  try {
    if (slot >= pad_dirty_flag_.size()) pad_dirty_flag_.resize(size_t{slot} + 1 + slot / 2, 0);
    if (pad_dirty_flag_[slot] != 0) return;
    // Past half the table a whole copy is as cheap as the list.
    if (pad_dirty_.size() >= 64 && pad_dirty_.size() > pads_.size() / 2) {
      pad_all_dirty_ = true;
      return;
    }
    pad_dirty_.push_back(slot);
    pad_dirty_flag_[slot] = 1;
  } catch (...) {
    pad_all_dirty_ = true;
  }
}

void Ledger::pad_changes(bool whole, PadChanges* out) {
  std::lock_guard<FastMutex> lock(mutex_);
  out->size = pads_.size();
  out->whole = whole || pad_all_dirty_;
  out->slots.clear();
  out->ranges.clear();
  out->owners.clear();
  if (out->whole) {
    out->ranges = pads_;
    out->owners = pad_owners_;
  } else {
    for (uint32_t slot : pad_dirty_) {
      if (slot >= pads_.size()) continue;
      out->slots.push_back(slot);
      out->ranges.push_back(pads_[slot]);
      out->owners.push_back(pad_owners_[slot]);
    }
  }
  // Only once the copy is made: a copy that threw leaves the record as it was.
  for (uint32_t slot : pad_dirty_) pad_dirty_flag_[slot] = 0;
  pad_dirty_.clear();
  pad_all_dirty_ = false;
}

void Ledger::record(DevPtr ptr, LedgerEntry entry, const char* file, int line) {
  std::lock_guard<FastMutex> lock(mutex_);
  record_locked(ptr, entry, file, line);
}

void Ledger::record_locked(DevPtr ptr, const LedgerEntry& entry, const char* file, int line) {
  const Ready r = ready_locked(file, line, entry.pad > 0);
  commit_locked(ptr, [&](LedgerEntry& slot) {
    slot = entry;
    slot.site = r.site;
    slot.tag = r.tag;
  });
}

void Ledger::grow_entries_locked() { entries_.reserve(entries_.size() + 1); }

void Ledger::grow_tags_locked(uint32_t tag) { tag_totals_.resize(size_t{tag} + 1); }

bool Ledger::take(DevPtr ptr, LedgerEntry* out) {
  std::lock_guard<FastMutex> lock(mutex_);
  return take_locked(ptr, out);
}

bool Ledger::take_locked(DevPtr ptr, LedgerEntry* out) {
  LedgerEntry* found = entries_.get(ptr);
  if (found == nullptr) return false;
  take_found_locked(found, out);
  return true;
}

void Ledger::take_found_locked(LedgerEntry* found, LedgerEntry* out) noexcept {
  const LedgerEntry& e = *found;
  count_locked(e, false);
  if (e.pad > 0) drop_pad_locked(e.pad_slot);
  if (out != nullptr) *out = e;
  entries_.erase_value(found);
}

void Ledger::move_last_pad_locked(uint32_t slot) noexcept {
  pads_[slot] = pads_.back();
  pad_owners_[slot] = pad_owners_.back();
  entries_[pad_owners_[slot].ptr].pad_slot = slot;
  mark_pad_locked(slot);
}

void Ledger::restore(DevPtr ptr, const LedgerEntry& entry) {
  std::lock_guard<FastMutex> lock(mutex_);
  restore_locked(ptr, entry);
}

void Ledger::restore_locked(DevPtr ptr, const LedgerEntry& entry) {
  LedgerEntry e = entry;
  if (e.tag >= tag_totals_.size()) tag_totals_.resize(size_t{e.tag} + 1);
  count_locked(e, true);
  if (e.pad > 0) {
    // take() moved the last pad into this slot: move it back to the end.
    const uint32_t slot = e.pad_slot;
    if (slot < pads_.size()) {
      pads_.push_back(pads_[slot]);
      pad_owners_.push_back(pad_owners_[slot]);
      entries_[pad_owners_.back().ptr].pad_slot = static_cast<uint32_t>(pads_.size() - 1);
      pads_[slot] = backend::Range{ptr + e.bytes, e.pad};
      pad_owners_[slot] = PadOwner{ptr, e.seq};
      mark_pad_locked(static_cast<uint32_t>(pads_.size() - 1));
      mark_pad_locked(slot);
    } else {
      append_pad_locked(ptr, &e);
    }
  }
  entries_[ptr] = e;
}

bool Ledger::lookup(DevPtr ptr, LedgerEntry* out) const {
  std::lock_guard<FastMutex> lock(mutex_);
  auto it = entries_.find(ptr);
  if (it == entries_.end()) return false;
  *out = it->second;
  return true;
}

void Ledger::pads(std::vector<backend::Range>* pads, std::vector<DevPtr>* owners) const {
  std::lock_guard<FastMutex> lock(mutex_);
  *pads = pads_;
  owners->clear();
  owners->reserve(pad_owners_.size());
  for (const PadOwner& o : pad_owners_) owners->push_back(o.ptr);
}

void Ledger::pads(std::vector<backend::Range>* pads, std::vector<PadOwner>* owners) const {
  std::lock_guard<FastMutex> lock(mutex_);
  *pads = pads_;
  // The seqs sit beside the pads: no entry lookup per pad (a cold hash
  // probe each, 1.5 ms at 100k zones).
  *owners = pad_owners_;
}

size_t Ledger::pad_count() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return pads_.size();
}

bool Ledger::lookup_seq(DevPtr ptr, uint64_t seq, LedgerEntry* out) const {
  std::lock_guard<FastMutex> lock(mutex_);
  auto it = entries_.find(ptr);
  if (it == entries_.end() || it->second.seq != seq) return false;
  *out = it->second;
  return true;
}

std::vector<Ledger::SeqPad> Ledger::pads_with_seq(uint64_t lo, uint64_t hi) const {
  std::vector<SeqPad> out;
  std::lock_guard<FastMutex> lock(mutex_);  // the pool's: Block::owners is stable
  for (size_t i = 0; i < pads_.size(); ++i) {
    const uint64_t seq = pad_owners_[i].seq;
    if (seq < lo || seq >= hi) continue;
    const auto it = entries_.find(pad_owners_[i].ptr);
    const bool earlier =
        it != entries_.end() && it->second.block != nullptr && it->second.block->unchecked();
    out.push_back(SeqPad{pads_[i], seq, earlier});
  }
  return out;
}

bool Ledger::find_containing(DevPtr p, DevPtr* base, LedgerEntry* out) const {
  std::lock_guard<FastMutex> lock(mutex_);
  for (const auto& [ptr, e] : entries_) {
    if (p >= ptr && p - ptr < e.bytes) {
      *base = ptr;
      *out = e;
      return true;
    }
  }
  return false;
}

const char* Ledger::site_file(uint32_t site) const {
  std::lock_guard<FastMutex> lock(mutex_);
  return sites_[site].file.c_str();
}

int Ledger::site_line(uint32_t site) const {
  std::lock_guard<FastMutex> lock(mutex_);
  return sites_[site].line;
}

size_t Ledger::live_bytes() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return live_bytes_;
}

size_t Ledger::live_count() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return entries_.size();
}

size_t Ledger::slack_bytes() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return slack_bytes_;
}

namespace {
void sort_by_seq(std::vector<std::pair<DevPtr, LedgerEntry>>& v) {
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) {
              return a.second.seq != b.second.seq ? a.second.seq < b.second.seq
                                                  : a.second.order < b.second.order;
            });
}
}  // namespace

std::vector<std::pair<DevPtr, LedgerEntry>> Ledger::by_seq() const {
  std::vector<std::pair<DevPtr, LedgerEntry>> out;
  {
    std::lock_guard<FastMutex> lock(mutex_);
    out.assign(entries_.begin(), entries_.end());
  }
  sort_by_seq(out);
  return out;
}

std::vector<SiteUsage> Ledger::sites_by_bytes() const {
  std::vector<SiteUsage> out;
  {
    std::lock_guard<FastMutex> lock(mutex_);
    for (const Site& s : sites_) {
      if (s.live_count > 0) out.push_back({s.file.c_str(), s.line, s.live_bytes, s.live_count});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SiteUsage& a, const SiteUsage& b) { return a.bytes > b.bytes; });
  return out;
}

std::vector<TagUsage> Ledger::tags_by_bytes() const {
  std::vector<TagUsage> out;
  {
    std::lock_guard<FastMutex> lock(mutex_);
    for (size_t i = 0; i < tag_totals_.size(); ++i) {
      const TagTotal& t = tag_totals_[i];
      if (t.count > 0) out.push_back({static_cast<uint32_t>(i), t.bytes, t.count});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TagUsage& a, const TagUsage& b) { return a.bytes > b.bytes; });
  return out;
}

bool Ledger::tag_of(DevPtr ptr, uint32_t* tag) const {
  std::lock_guard<FastMutex> lock(mutex_);
  auto it = entries_.find(ptr);
  if (it == entries_.end()) return false;
  *tag = it->second.tag;
  return true;
}

}  // namespace metrale::core
