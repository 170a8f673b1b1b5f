// Strings handed out through the C ABI (module, kernel and site names) live
// here so their pointers stay valid until the context is destroyed.
#pragma once

#include <mutex>
#include <string>
#include <string_view>
#include <unordered_set>

namespace metrale::core {

class InternTable {
 public:
  const char* intern(std::string_view text);

 private:
  std::mutex mutex_;
  std::unordered_set<std::string> strings_;  // node-based: c_str() never moves
};

}  // namespace metrale::core
