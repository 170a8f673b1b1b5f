// Every live context's ledger, grouped by device and site. Contexts are
// walked under the registry's walk lock (no context is destroyed meanwhile)
// and each ledger is read under its own lock, one at a time: the figures of
// two contexts may be a moment apart, as two separate calls would be.
#include "core/process_report.hpp"

#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "backend/error.hpp"
#include "core/context.hpp"
#include "core/context_registry.hpp"
#include "core/format.hpp"
#include "core/usage_report.hpp"

namespace metrale::core {
namespace {

struct SiteSum {
  uint64_t bytes = 0, count = 0;
};

struct DeviceSum {
  uint64_t bytes = 0, count = 0;
  size_t contexts = 0;
  std::map<std::pair<std::string, int>, SiteSum> sites;
};

// (backend, ordinal) -> sums; cuda devices first, then host, by ordinal.
using Devices = std::map<std::pair<int, int>, DeviceSum>;

Devices collect() {
  Devices out;
  for_each_context([&](metrale_context& ctx) {
    // Sorted by cuda first: METRALE_BACKEND_CUDA (1) < METRALE_BACKEND_HOST (2).
    DeviceSum& d = out[{static_cast<int>(ctx.backend_kind()), ctx.device_ordinal()}];
    ++d.contexts;
    for (const SiteUsage& s : ctx.ledger_sites()) {
      if (s.count == 0) continue;
      SiteSum& site = d.sites[{s.file != nullptr ? s.file : "?", s.line}];
      site.bytes += s.bytes;
      site.count += s.count;
      d.bytes += s.bytes;
      d.count += s.count;
    }
  });
  return out;
}

std::string bytes_text(uint64_t b) {
  return human_bytes(b) + " (" + std::to_string(b) + " bytes)";
}

}  // namespace

void process_alloc_report(size_t top_n, size_t min_mib, char* buf, size_t buflen,
                          size_t* needed) {
  const Devices devices = collect();
  constexpr uint64_t kMiB = 1024 * 1024;
  const bool none_qualifies = static_cast<uint64_t>(min_mib) > UINT64_MAX / kMiB;
  const uint64_t min_bytes = none_qualifies ? UINT64_MAX : static_cast<uint64_t>(min_mib) * kMiB;
  std::string text = "live device memory by device and site, process " +
                     std::to_string(static_cast<long>(getpid())) + " (";
  text += top_n == 0 ? std::string("all sites") : "top " + std::to_string(top_n) + " per device";
  text += ", >= " + std::to_string(min_mib) + " MiB):\n";
  uint64_t total_bytes = 0, total_count = 0;
  for (const auto& [key, d] : devices) {
    total_bytes += d.bytes;
    total_count += d.count;
    text += std::string(key.first == METRALE_BACKEND_CUDA ? "cuda" : "host") + " device " +
            std::to_string(key.second) + ": " + bytes_text(d.bytes) + " in " +
            plural(d.count, "allocation") + ", " + plural(d.contexts, "context") + "\n";
    std::vector<std::pair<std::pair<std::string, int>, SiteSum>> sites(d.sites.begin(),
                                                                      d.sites.end());
    std::stable_sort(sites.begin(), sites.end(),
                     [](const auto& a, const auto& b) { return a.second.bytes > b.second.bytes; });
    size_t shown = 0;
    for (const auto& [site, sum] : sites) {
      if (none_qualifies || (top_n != 0 && shown >= top_n) || sum.bytes < min_bytes) continue;
      ++shown;
      text += "  " + bytes_text(sum.bytes) + " in " + plural(sum.count, "allocation") + " at " +
              site_text(site.first.c_str(), site.second) + "\n";
    }
  }
  text += "total: " + bytes_text(total_bytes) + " in " + plural(total_count, "allocation") +
          " on " + plural(devices.size(), "device") + "\n";
  copy_report(text, buf, buflen, needed);
}

void device_live(metrale_backend_t backend, int device, size_t* bytes, size_t* count) {
  uint64_t b = 0, c = 0;
  for_each_context([&](metrale_context& ctx) {
    if (ctx.backend_kind() != backend || ctx.device_ordinal() != device) return;
    b += ctx.live_bytes();
    c += ctx.live_count();
  });
  *bytes = static_cast<size_t>(b);
  *count = static_cast<size_t>(c);
}

}  // namespace metrale::core
