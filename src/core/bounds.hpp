// Checked pointers: an ordered index of every device range the context
// knows (ledger, arena, pinned mappings), kept only when the option is on.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace metrale::core {

struct Region {
  size_t bytes;
  const char* file;  // the allocation site, or what kind of memory it is
  int line;          // 0 when file is not a site
};

class BoundsIndex {
 public:
  void add(uint64_t ptr, const Region& r);
  void remove(uint64_t ptr);
  // Removes the region keyed by ptr into *out; false when there is none.
  bool take(uint64_t ptr, Region* out);
  // Throws OUT_OF_BOUNDS when [ptr, ptr+bytes) is not inside one region,
  // naming `what` ("destination", ...) and the closest region.
  void check(uint64_t ptr, size_t bytes, const char* what) const;

 private:
  mutable std::mutex mutex_;
  std::map<uint64_t, Region> regions_;
};

}  // namespace metrale::core
