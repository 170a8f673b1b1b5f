// The ledger on its own: record+forget with 1k, 100k and 1M live entries,
// measured on metrale::core::Ledger compiled into this program (the library
// exports only its C ABI, so the class cannot be reached through it).
// bench_ledger measures the whole public path beside it; the difference is
// the backend's own allocation of the bytes.
// Usage: bench_ledger_core [OUT.json]
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "core/ledger.hpp"

using namespace bench;

namespace {

constexpr size_t kBytes = 64;
constexpr int kSites = 100;  // live entries spread over 100 file:line sites
constexpr uint64_t kBase = 0x7f0000000000ull;

metrale::core::LedgerEntry entry(uint64_t seq) {
  metrale::core::LedgerEntry e;
  e.bytes = kBytes;
  e.reserved = 256;
  e.seq = seq;
  return e;
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_ledger_core");
  const std::string out = argc > 1 ? argv[1] : "-";
  report.meta("backend", "none (the ledger class alone)");
  metrale::core::Ledger ledger;
  uint64_t next = 0;
  for (size_t n : {size_t{1000}, size_t{100000}, size_t{1000000}}) {
    const std::string label = n >= 1000000 ? "1M" : std::to_string(n / 1000) + "k";
    while (ledger.live_count() < n) {
      ledger.record(kBase + next * 256, entry(next), "bench/live_site.c",
                    static_cast<int>(next % kSites) + 1);
      ++next;
    }
    const std::string group = "ledger_core_record_forget/" + label + "_live";
    uint64_t probe = 1ull << 40;  // addresses apart from the live ones
    std::vector<Case> cases = {{group + "/ledger", [&](size_t m) {
                                  metrale::core::LedgerEntry taken;
                                  for (size_t i = 0; i < m; ++i) {
                                    const uint64_t p = kBase + (probe++) * 256;
                                    ledger.record(p, entry(next++), "bench/hot_site.c", 7);
                                    if (!ledger.take(p, &taken)) return false;
                                  }
                                  return true;
                                }, nullptr}};
    const size_t batch = 2000;
    for (const auto& r : run_interleaved(cases, 21, batch)) {
      Entry e;
      e.group = group;
      e.variant = "ledger";
      e.side = "library";
      e.size_bytes = kBytes;
      e.batch = batch;
      e.timing = "Ledger::record then Ledger::take of the same pointer, per op, with " +
                 std::to_string(n) + " other entries live";
      e.note = "the ledger class alone (mutex, hash map, per-site totals), no backend";
      if (n == 1000000) e.target = {Target::ABS_NS, 100};
      add_case(&report, r, e);
    }
  }
  return report.write(out) ? 0 : 1;
}
