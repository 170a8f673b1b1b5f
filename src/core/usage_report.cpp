#include "core/usage_report.hpp"

#include <cstring>

#include "backend/error.hpp"
#include "core/format.hpp"

namespace metrale::core {

std::string usage_report(const char* noun, size_t top_n, size_t min_mib,
                         const std::vector<UsageRow>& rows) {
  std::string text = std::string("live device memory by ") + noun + " (";
  text += top_n == 0 ? "all " + std::string(noun) + "s" : "top " + std::to_string(top_n);
  text += ", >= " + std::to_string(min_mib) + " MiB):\n";
  constexpr uint64_t kMiB = 1024 * 1024;
  const bool none_qualifies = static_cast<uint64_t>(min_mib) > UINT64_MAX / kMiB;
  const uint64_t min_bytes = none_qualifies ? UINT64_MAX : static_cast<uint64_t>(min_mib) * kMiB;
  uint64_t total_bytes = 0, total_count = 0;
  size_t shown = 0;
  for (const UsageRow& r : rows) {
    total_bytes += r.bytes;
    total_count += r.count;
    if (none_qualifies || (top_n != 0 && shown >= top_n) || r.bytes < min_bytes) continue;
    ++shown;
    text += "  " + human_bytes(r.bytes) + " in " + plural(r.count, "allocation") + r.label + "\n";
  }
  text += "total: " + human_bytes(total_bytes) + " in " + plural(total_count, "allocation") + "\n";
  return text;
}

void copy_report(const std::string& text, char* buf, size_t buflen, size_t* needed) {
  *needed = text.size() + 1;
  if (buflen == 0) return;
  const size_t n = text.size() < buflen - 1 ? text.size() : buflen - 1;
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
  if (buflen < *needed) {
    fail(METRALE_ERROR_BUFFER_TOO_SMALL, "buf holds " + std::to_string(buflen) +
                                             " bytes, the report needs " +
                                             std::to_string(*needed) + " (text truncated)");
  }
}

}  // namespace metrale::core
