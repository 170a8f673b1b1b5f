#include "core/intern.hpp"

namespace metrale::core {

const char* InternTable::intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  return strings_.emplace(text).first->c_str();
}

}  // namespace metrale::core
