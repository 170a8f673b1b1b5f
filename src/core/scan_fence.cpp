#include "core/scan_fence.hpp"

namespace metrale::core {

uint64_t ScanFence::enter() {
  std::lock_guard<std::mutex> lock(mutex_);
  const uint64_t id = next_id_++;
  open_.insert(id);
  return id;
}

std::vector<ScanFence::Released> ScanFence::leave(uint64_t id) {
  std::vector<Released> out;
  std::lock_guard<std::mutex> lock(mutex_);
  open_.erase(id);
  // A held pointer is released once no pass older than its free is open:
  // passes opened after the free never had it in their snapshot.
  const uint64_t oldest_open = open_.empty() ? UINT64_MAX : *open_.begin();
  while (!held_.empty() && held_.front().first_unseen <= oldest_open) {
    out.push_back(held_.front().what);
    held_.pop_front();
  }
  return out;
}

bool ScanFence::hold(DevPtr ptr, void* block) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (open_.empty()) return false;
  held_.push_back(Held{Released{ptr, block}, next_id_});
  return true;
}

bool ScanFence::any_open() {
  std::lock_guard<std::mutex> lock(mutex_);
  return !open_.empty();
}

std::vector<ScanFence::Released> ScanFence::drain() {
  std::vector<Released> out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (const Held& h : held_) out.push_back(h.what);
  held_.clear();
  return out;
}

}  // namespace metrale::core
