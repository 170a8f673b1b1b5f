// Host ranges the context page-locked: allocated pinned or registered.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace metrale::core {

enum class PinKind { Allocated, Registered };

struct PinnedRange {
  uintptr_t base;
  size_t bytes;
  PinKind kind;
};

class PinnedRegistry {
 public:
  // Throws INVALID_ARGUMENT when [base, base+bytes) overlaps a known range.
  void add(void* base, size_t bytes, PinKind kind);
  // Removes the range starting exactly at base with that kind; throws
  // NOT_FOUND (naming what base is instead) otherwise.
  PinnedRange remove(void* base, PinKind kind);
  // The range holding all of [p, p+bytes); false when none does.
  bool find(const void* p, size_t bytes, PinnedRange* out) const;
  std::vector<PinnedRange> all() const;

 private:
  mutable std::mutex mutex_;
  std::map<uintptr_t, PinnedRange> ranges_;
};

}  // namespace metrale::core
