// Ledger queries by tag (core/tags.hpp): the text report grouped by tag and
// the tag of one live allocation.
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/tags.hpp"
#include "core/usage_report.hpp"

using metrale::fail;

void metrale_context::alloc_report_by_tag(size_t top_n, size_t min_mib, char* buf,
                                          size_t buflen, size_t* needed) const {
  std::vector<metrale::core::UsageRow> rows;
  for (const auto& t : ledger_.tags_by_bytes()) {
    const char* name = metrale::core::tags::name(t.tag);
    rows.push_back({t.bytes, t.count,
                    name != nullptr ? " tagged " + std::string(name) : std::string(" untagged")});
  }
  metrale::core::copy_report(metrale::core::usage_report("tag", top_n, min_mib, rows), buf,
                             buflen, needed);
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
