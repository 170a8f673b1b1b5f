// Strings handed out through the C ABI (module, kernel and site names) live
// here so their pointers stay valid until the context is destroyed.
#pragma once

#include <cstddef>
#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace metrale::core {

class InternTable {
 public:
  // Text that names something real (a kernel found, an allocation site):
  // bounded by the program, kept without limit.
  const char* intern(std::string_view text);
  // Text the caller may vary without end, such as the names in failed kernel
  // lookups and the file of any lookup: a string not yet held is added only while the bytes added this
  // way stay under kUntrustedBudget; past it kNotKept is returned instead, so
  // a loop of lookups of new names cannot grow the table for the context's
  // whole life. Text already held is returned as is.
  const char* intern_untrusted(std::string_view text);
  // Strings held, for tests and diagnostics.
  size_t size() const;

  static constexpr size_t kUntrustedBudget = 1u << 20;  // bytes, overhead included
  static constexpr const char* kNotKept = "<name not kept: too many distinct lookup names>";

 private:
  mutable std::mutex mutex_;
  std::unordered_set<std::string> strings_;  // node-based: c_str() never moves
  size_t untrusted_bytes_ = 0;
};

}  // namespace metrale::core
