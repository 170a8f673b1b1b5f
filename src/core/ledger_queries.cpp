// Ledger listings, the text report, and the sweep of what is still live.
#include <cstdint>
#include <cstring>
#include <map>

#include "core/context.hpp"
#include "core/usage_report.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::fail;
using metrale::core::human_bytes;
using metrale::core::plural;

void metrale_context::live_allocations(metrale_allocation_t* out, size_t cap,
                                       size_t* count) const {
  if (cap == 0) {
    *count = ledger_.live_count();
    return;
  }
  auto entries = ledger_.by_seq();
  for (size_t i = 0; i < entries.size() && i < cap; ++i) {
    const auto& [ptr, e] = entries[i];
    out[i] = metrale_allocation_t{ptr,
                                  e.bytes,
                                  e.seq,
                                  ledger_.site_file(e.site),
                                  ledger_.site_line(e.site),
                                  e.kind,
                                  e.pad};
  }
  *count = entries.size();
  if (cap < entries.size()) {
    fail(METRALE_ERROR_BUFFER_TOO_SMALL,
         "out holds " + std::to_string(cap) + " entries, " + std::to_string(entries.size()) +
             " allocations are live (the first " + std::to_string(cap) + " were written)");
  }
}

void metrale_context::alloc_report(size_t top_n, size_t min_mib, char* buf, size_t buflen,
                                   size_t* needed) const {
  std::vector<metrale::core::UsageRow> rows;
  for (const auto& s : ledger_.sites_by_bytes()) {
    rows.push_back({s.bytes, s.count, " at " + metrale::core::site_text(s.file, s.line)});
  }
  metrale::core::copy_report(metrale::core::usage_report("site", top_n, min_mib, rows), buf,
                             buflen, needed);
}

// The free site of what the sweep frees, as reports name it.
constexpr const char* kSweepSite = "<metrale_sweep_unreleased>";

// Exact under concurrent free and alloc: only what take() removed is
// counted (a concurrent free of the same pointer wins or loses as a whole),
// and bytes and sites come from the removed entry, not from the snapshot: an
// address freed and allocated again since then is another allocation.
size_t metrale_context::sweep() {
  auto entries = ledger_.by_seq();
  struct Tally {
    uint64_t count = 0, bytes = 0;
  };
  std::map<uint32_t, Tally> by_site;  // site ids grow with first use: oldest site first
  size_t swept = 0;
  for (const auto& entry : entries) {
    const uint64_t ptr = entry.first;
    metrale::core::LedgerEntry taken;
    metrale::core::EventLog::Ticket tk;
    if (!take_entry(ptr, &taken, &tk)) continue;  // freed meanwhile by another thread
    ++swept;
    if (bounds_) bounds_->remove(ptr);
    Tally& t = by_site[taken.site];
    t.count += 1;
    t.bytes += taken.bytes;
    {
      std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
      count_free_held(taken.bytes);
    }
    log_free(tk, taken, ptr, nullptr, nullptr, 0, /*sweep=*/true);
    // On a lost context the free may fail too; the entry is gone either way.
    try {
      // A block a capture still uses goes back once it closes (rule 9).
      if (!defer_while_captured(ptr, taken, kSweepSite)) {
        release_memory(ptr, taken, 0, kSweepSite, 0);
      }
    } catch (const std::exception& ex) {
      metrale::core::log().debug("sweep: freeing {} failed: {}", metrale::core::hex(ptr),
                                 ex.what());
    }
  }
  for (const auto& [site, t] : by_site) {
    metrale::core::log().warn("{} ({}) from {}:{} still live at sweep",
                              plural(t.count, "allocation"), human_bytes(t.bytes),
                              ledger_.site_file(site), ledger_.site_line(site));
  }
  return swept;
}
