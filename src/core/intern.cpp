#include "core/intern.hpp"

namespace metrale::core {

namespace {
// What one more node costs besides its text: the hash node and the string.
constexpr size_t kNodeOverhead = 64;
}  // namespace

const char* InternTable::intern(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  return strings_.emplace(text).first->c_str();
}

const char* InternTable::intern_untrusted(std::string_view text) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = strings_.find(std::string(text));
  if (it != strings_.end()) return it->c_str();
  const size_t cost = text.size() + kNodeOverhead;
  if (cost > kUntrustedBudget - untrusted_bytes_) return kNotKept;
  untrusted_bytes_ += cost;
  return strings_.emplace(text).first->c_str();
}

size_t InternTable::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return strings_.size();
}

}  // namespace metrale::core
