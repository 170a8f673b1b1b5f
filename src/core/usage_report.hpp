// The text of a live-memory report (metrale_alloc_report by site,
// metrale_alloc_report_by_tag by tag): one line per group, largest first,
// filtered by top_n and min_mib, then the total of every group; and the
// copy into the caller's buffer with the BUFFER_TOO_SMALL rule both share.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace metrale::core {

struct UsageRow {
  uint64_t bytes = 0;
  uint64_t count = 0;
  std::string label;  // what follows "N allocations": " at file:line", " tagged x"
};

// rows largest first; `noun` names the groups ("site", "tag"). A min_mib
// whose bytes overflow 64 bits selects none (rather than wrapping to a small
// threshold that lets every group through).
std::string usage_report(const char* noun, size_t top_n, size_t min_mib,
                         const std::vector<UsageRow>& rows);

// *needed = text size + 1; copies what fits (NUL-terminated, unless buflen
// is 0); BUFFER_TOO_SMALL (metrale::Error) when truncated.
void copy_report(const std::string& text, char* buf, size_t buflen, size_t* needed);

}  // namespace metrale::core
