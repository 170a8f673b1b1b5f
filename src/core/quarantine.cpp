#include "core/quarantine.hpp"

#include <algorithm>

namespace metrale::core {

QuarantineList Quarantine::admit(QuarantineList blocks) noexcept {
  QuarantineList out;
  std::lock_guard<std::mutex> lock(mutex_);
  for (QuarantinedBlock& b : blocks) {
    b.serial = next_serial_++;
    bytes_ += b.span();
    if (b.waiting()) waiting_.fetch_add(1, std::memory_order_release);
  }
  held_.splice(held_.end(), blocks);
  while (bytes_ > budget_ && !held_.empty()) {
    bytes_ -= held_.front().span();
    if (held_.front().waiting()) waiting_.fetch_sub(1, std::memory_order_release);
    out.splice(out.end(), held_, held_.begin());
  }
  return out;
}

std::vector<QuarantinedBlock> Quarantine::snapshot() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return std::vector<QuarantinedBlock>(held_.begin(), held_.end());
}

bool Quarantine::holds(uint64_t serial) const {
  std::lock_guard<std::mutex> lock(mutex_);
  // Serials rise from front to back.
  auto it = std::lower_bound(held_.begin(), held_.end(), serial,
                             [](const QuarantinedBlock& q, uint64_t s) { return q.serial < s; });
  return it != held_.end() && it->serial == serial;
}

bool Quarantine::mark_filled(uint64_t serial) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = std::lower_bound(held_.begin(), held_.end(), serial,
                             [](const QuarantinedBlock& q, uint64_t s) { return q.serial < s; });
  if (it == held_.end() || it->serial != serial || !it->waiting()) return false;
  it->filled = true;
  it->waits.clear();
  waiting_.fetch_sub(1, std::memory_order_release);
  return true;
}

void Quarantine::retarget(uint64_t gone, uint64_t heir) {
  std::lock_guard<std::mutex> lock(mutex_);
  for (QuarantinedBlock& q : held_)
    if (q.stream == gone) q.stream = heir;
}

QuarantineList Quarantine::drain() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  QuarantineList out;
  out.swap(held_);
  bytes_ = 0;
  waiting_.store(0, std::memory_order_release);
  return out;
}

size_t Quarantine::bytes() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return bytes_;
}

}  // namespace metrale::core
