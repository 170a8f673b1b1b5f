#include "core/ledger.hpp"

#include <algorithm>
#include <cstring>

namespace metrale::core {

Ledger::Ledger() { entries_.reserve(4096); }

uint32_t Ledger::site_id_locked(const char* file, int line) {
  size_t slot = (reinterpret_cast<uintptr_t>(file) >> 3 ^ static_cast<size_t>(line) * 31) %
                kSiteCacheSlots;
  SiteCacheSlot& c = site_cache_[slot];
  if (c.file == file && c.line == line && std::strcmp(file, sites_[c.id].file.c_str()) == 0) {
    return c.id;
  }
  uint32_t id = site_id_by_text(file, line);
  c = SiteCacheSlot{file, line, id};
  return id;
}

uint32_t Ledger::site_id_by_text(const char* file, int line) {
  auto it = site_ids_.find(SiteKey{file, line});
  if (it != site_ids_.end()) return it->second;
  sites_.push_back(Site{file, line});
  uint32_t id = static_cast<uint32_t>(sites_.size() - 1);
  site_ids_.emplace(SiteKey{sites_.back().file, line}, id);
  return id;
}

void Ledger::record(DevPtr ptr, LedgerEntry entry, const char* file, int line) {
  std::lock_guard<std::mutex> lock(mutex_);
  entry.site = site_id_locked(file, line);
  Site& site = sites_[entry.site];
  site.live_bytes += entry.bytes;
  site.live_count += 1;
  live_bytes_ += entry.bytes;
  slack_bytes_ += entry.reserved - entry.bytes - entry.pad;
  entries_[ptr] = entry;
}

bool Ledger::take(DevPtr ptr, LedgerEntry* out) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(ptr);
  if (it == entries_.end()) return false;
  const LedgerEntry& e = it->second;
  Site& site = sites_[e.site];
  site.live_bytes -= e.bytes;
  site.live_count -= 1;
  live_bytes_ -= e.bytes;
  slack_bytes_ -= e.reserved - e.bytes - e.pad;
  *out = e;
  entries_.erase(it);
  return true;
}

bool Ledger::find_containing(DevPtr p, DevPtr* base, LedgerEntry* out) const {
  std::lock_guard<std::mutex> lock(mutex_);
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
  std::lock_guard<std::mutex> lock(mutex_);
  return sites_[site].file.c_str();
}

int Ledger::site_line(uint32_t site) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return sites_[site].line;
}

size_t Ledger::live_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return live_bytes_;
}

size_t Ledger::live_count() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return entries_.size();
}

size_t Ledger::slack_bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return slack_bytes_;
}

namespace {
void sort_by_seq(std::vector<std::pair<DevPtr, LedgerEntry>>& v) {
  std::sort(v.begin(), v.end(),
            [](const auto& a, const auto& b) { return a.second.seq < b.second.seq; });
}
}  // namespace

std::vector<std::pair<DevPtr, LedgerEntry>> Ledger::by_seq() const {
  std::vector<std::pair<DevPtr, LedgerEntry>> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    out.assign(entries_.begin(), entries_.end());
  }
  sort_by_seq(out);
  return out;
}

std::vector<std::pair<DevPtr, LedgerEntry>> Ledger::padded_by_seq() const {
  std::vector<std::pair<DevPtr, LedgerEntry>> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& kv : entries_) {
      if (kv.second.pad > 0) out.push_back(kv);
    }
  }
  sort_by_seq(out);
  return out;
}

std::vector<SiteUsage> Ledger::sites_by_bytes() const {
  std::vector<SiteUsage> out;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const Site& s : sites_) {
      if (s.live_count > 0) out.push_back({s.file.c_str(), s.line, s.live_bytes, s.live_count});
    }
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const SiteUsage& a, const SiteUsage& b) { return a.bytes > b.bytes; });
  return out;
}

}  // namespace metrale::core
