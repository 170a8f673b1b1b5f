#include "core/pad_verify_queue.hpp"

#include <cstdlib>
#include <limits>

#include "backend/env_number.hpp"

namespace metrale::core {

PadVerifyQueue::Limits PadVerifyQueue::limits_from_env() {
  Limits l;
  auto read = [](const char* var, size_t* out) {
    const char* v = std::getenv(var);
    if (v == nullptr || *v == '\0') return;
    *out = static_cast<size_t>(
        backend::parse_env_number(var, v, std::numeric_limits<size_t>::max()));
  };
  read("METRALE_REDZONE_VERIFY_BATCH", &l.count);
  read("METRALE_REDZONE_VERIFY_BYTES", &l.bytes);
  size_t ordered = 1;
  const char* v = std::getenv("METRALE_REDZONE_VERIFY_ORDERED");
  if (v != nullptr && *v != '\0')
    ordered = static_cast<size_t>(backend::parse_env_number("METRALE_REDZONE_VERIFY_ORDERED", v, 1));
  l.ordered = ordered != 0;
  const char* r = std::getenv("METRALE_REDZONE_REUSE");
  if (r != nullptr && *r != '\0') {
    l.reuse = static_cast<size_t>(
        backend::parse_env_number("METRALE_REDZONE_REUSE", r, pool::PadOwners::kMax));
    if (l.reuse == 0) l.reuse = 1;
  }
  return l;
}

std::vector<PendingPad> PadVerifyQueue::take_all() {
  std::vector<PendingPad> out;
  std::lock_guard<FastMutex> lock(mutex_);
  out.swap(held_);
  held_.swap(spare_);
  bytes_ = 0;
  return out;
}

void PadVerifyQueue::recycle(std::vector<PendingPad>&& done) {
  done.clear();
  std::lock_guard<FastMutex> lock(mutex_);
  if (done.capacity() > spare_.capacity()) spare_.swap(done);
}

void PadVerifyQueue::put_back(const std::vector<PendingPad>& back) {
  std::lock_guard<FastMutex> lock(mutex_);
  held_.reserve(held_.size() + back.size());  // then no push below can throw
  for (const PendingPad& p : back) {
    held_.push_back(p);
    bytes_ += p.held_bytes;
  }
}

void PadVerifyQueue::retarget(uint64_t gone, uint64_t heir) {
  std::lock_guard<FastMutex> lock(mutex_);
  for (PendingPad& p : held_)
    if (p.stream == gone) p.stream = heir;
}

size_t PadVerifyQueue::count() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return held_.size();
}

size_t PadVerifyQueue::bytes() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return bytes_;
}

bool PadVerifyQueue::bound_met() const {
  std::lock_guard<FastMutex> lock(mutex_);
  return !held_.empty() && (held_.size() >= limits_.count || bytes_ >= limits_.bytes);
}

void PadVerifyQueue::note_reported(const std::vector<uint64_t>& seqs) {
  if (seqs.empty()) return;
  std::vector<char> fresh(seqs.size(), 0);  // which this call added (before any change)
  std::lock_guard<std::mutex> lock(reported_mutex_);
  size_t done = 0;
  try {
    for (; done < seqs.size(); ++done) fresh[done] = reported_.insert(seqs[done]).second;
  } catch (...) {
    // All or none: a scan that fails marks nothing.
    for (size_t i = 0; i < done; ++i)
      if (fresh[i] != 0) reported_.erase(seqs[i]);
    throw;
  }
  reported_count_.store(reported_.size(), std::memory_order_relaxed);
}

void PadVerifyQueue::forget_reported(const std::vector<uint64_t>& seqs) {
  if (!any_reported()) return;
  std::lock_guard<std::mutex> lock(reported_mutex_);
  for (uint64_t seq : seqs) reported_.erase(seq);
  reported_count_.store(reported_.size(), std::memory_order_relaxed);
}

bool PadVerifyQueue::was_reported(uint64_t seq) {
  std::lock_guard<std::mutex> lock(reported_mutex_);
  return reported_.count(seq) != 0;
}

bool PadVerifyQueue::take_reported(uint64_t seq) {
  std::lock_guard<std::mutex> lock(reported_mutex_);
  const bool was = reported_.erase(seq) != 0;
  reported_count_.store(reported_.size(), std::memory_order_relaxed);
  return was;
}

}  // namespace metrale::core
