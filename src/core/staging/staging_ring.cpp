// StagingRing: lazy allocation, the lease, teardown.
#include "core/staging/staging_ring.hpp"

#include "backend/error.hpp"

namespace metrale::core::staging {

void StagingRing::Lease::wait(StagingDevice& dev, size_t k) {
  StagingBuffer& b = ring_->buffers_[k];
  if (!b.in_flight) return;
  dev.event_synchronize(b.done);  // a failed DMA throws here, in_flight stays
  b.in_flight = false;
}

StagingRing::Lease StagingRing::try_take(StagingDevice& dev, std::string* failure, bool* fresh) {
  Lease lease;
  if (fresh != nullptr) *fresh = false;
  std::unique_lock<std::mutex> lock(mutex_, std::try_to_lock);
  if (!lock.owns_lock() || failed_) return lease;
  if (buffers_.empty()) {
    if (!allocate_locked(dev, failure)) return lease;
    if (fresh != nullptr) *fresh = true;
  }
  lease.ring_ = this;
  lease.lock_ = std::move(lock);
  return lease;
}

bool StagingRing::allocate_locked(StagingDevice& dev, std::string* failure) {
  try {
    buffers_.resize(count_);
    for (StagingBuffer& b : buffers_) {
      b.host = static_cast<unsigned char*>(dev.alloc_pinned(buffer_bytes_));
      b.done = dev.event_create();
    }
    allocated_.store(true, std::memory_order_release);
    return true;
  } catch (const std::exception& e) {
    if (failure != nullptr) *failure = e.what();
    free_locked(dev);
    failed_ = true;
    return false;
  }
}

void StagingRing::free_locked(StagingDevice& dev) noexcept {
  for (StagingBuffer& b : buffers_) {
    // The pinned memory may not go while a DMA still reads or writes it.
    try {
      if (b.in_flight) dev.event_synchronize(b.done);
    } catch (...) {
      // A failed DMA is over too; free what is there.
    }
    try {
      if (b.done != 0) dev.event_destroy(b.done);
    } catch (...) {
    }
    try {
      if (b.host != nullptr) dev.free_pinned(b.host);
    } catch (...) {
    }
  }
  buffers_.clear();
  allocated_.store(false, std::memory_order_release);
}

void StagingRing::release(StagingDevice& dev) noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  free_locked(dev);
}

}  // namespace metrale::core::staging
