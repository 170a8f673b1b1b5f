// Ledger queries by tag (core/tags.hpp): the text report grouped by tag and
// the tag of one live allocation.
#include <cstdint>
#include <cstring>
#include <string>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/tags.hpp"

using metrale::fail;
using metrale::core::human_bytes;
using metrale::core::plural;

void metrale_context::alloc_report_by_tag(size_t top_n, size_t min_mib, char* buf,
                                          size_t buflen, size_t* needed) const {
  auto tags = ledger_.tags_by_bytes();
  std::string text = "live device memory by tag (";
  text += top_n == 0 ? std::string("all tags") : "top " + std::to_string(top_n);
  text += ", >= " + std::to_string(min_mib) + " MiB):\n";
  uint64_t total_bytes = 0, total_count = 0;
  size_t shown = 0;
  // As alloc_report: a min_mib whose bytes overflow 64 bits selects none.
  constexpr uint64_t kMiB = 1024 * 1024;
  const bool none_qualifies = static_cast<uint64_t>(min_mib) > UINT64_MAX / kMiB;
  const uint64_t min_bytes = none_qualifies ? UINT64_MAX : static_cast<uint64_t>(min_mib) * kMiB;
  for (const auto& t : tags) {
    total_bytes += t.bytes;
    total_count += t.count;
    if (none_qualifies || (top_n != 0 && shown >= top_n) || t.bytes < min_bytes) continue;
    ++shown;
    const char* name = metrale::core::tags::name(t.tag);
    text += "  " + human_bytes(t.bytes) + " in " + plural(t.count, "allocation") +
            (name != nullptr ? " tagged " + std::string(name) : std::string(" untagged")) + "\n";
  }
  text += "total: " + human_bytes(total_bytes) + " in " + plural(total_count, "allocation") + "\n";
  *needed = text.size() + 1;
  if (buflen == 0) return;
  size_t n = text.size() < buflen - 1 ? text.size() : buflen - 1;
  std::memcpy(buf, text.data(), n);
  buf[n] = '\0';
  if (buflen < *needed) {
    fail(METRALE_ERROR_BUFFER_TOO_SMALL, "buf holds " + std::to_string(buflen) +
                                             " bytes, the report needs " +
                                             std::to_string(*needed) + " (text truncated)");
  }
}

const char* metrale_context::allocation_tag(DevPtr ptr) const {
  uint32_t tag = 0;
  if (!ledger_.tag_of(ptr, &tag)) {
    fail(METRALE_ERROR_NOT_FOUND, metrale::core::hex(ptr) +
                                      " is not a live allocation of this context (an interior "
                                      "pointer, never allocated here, or already freed)");
  }
  return metrale::core::tags::name(tag);
}
