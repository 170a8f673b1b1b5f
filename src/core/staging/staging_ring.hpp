// The pinned staging buffers of one context: `count` page-locked buffers of
// `buffer_bytes` each, with one event per buffer that marks when the last DMA
// from or into it finished. Allocated on first use, freed by release() (at
// context destroy). One copy uses the ring at a time: try_take() hands out a
// Lease or, while another copy holds the ring, an empty one, and the caller
// then copies directly (never waiting for another thread's staged copy).
#pragma once

#include <atomic>
#include <cstddef>
#include <mutex>
#include <string>
#include <vector>

#include "core/staging/staging_device.hpp"

namespace metrale::core::staging {

struct StagingBuffer {
  unsigned char* host = nullptr;
  EventHandle done = 0;    // recorded after the buffer's last DMA
  bool in_flight = false;  // `done` was recorded and not yet waited for
};

class StagingRing {
 public:
  StagingRing(size_t buffer_bytes, size_t count) : buffer_bytes_(buffer_bytes), count_(count) {}
  ~StagingRing() = default;  // release() must have run where buffers exist
  StagingRing(const StagingRing&) = delete;
  StagingRing& operator=(const StagingRing&) = delete;

  // Exclusive use of the ring while alive; empty (false) when not taken.
  class Lease {
   public:
    Lease() = default;
    explicit operator bool() const { return ring_ != nullptr; }
    size_t count() const { return ring_->count_; }
    size_t buffer_bytes() const { return ring_->buffer_bytes_; }
    StagingBuffer& buffer(size_t k) { return ring_->buffers_[k]; }
    // Waits for buffer k's last DMA (if any) so it may be refilled or read.
    void wait(StagingDevice& dev, size_t k);

   private:
    friend class StagingRing;
    StagingRing* ring_ = nullptr;
    std::unique_lock<std::mutex> lock_;
  };

  // The ring, its buffers allocated on first use. Empty when another copy
  // holds it, or when the buffers could not be allocated: then *failure (if
  // not null) gets the reason the first time only, and the ring stays off
  // for good (no pinned allocation is retried on every copy). *fresh (if
  // not null) says whether this call allocated the buffers. Never waits.
  Lease try_take(StagingDevice& dev, std::string* failure = nullptr, bool* fresh = nullptr);

  // Waits for every DMA still in flight, then frees buffers and events;
  // errors are ignored (teardown). Not concurrent with a lease.
  void release(StagingDevice& dev) noexcept;

  // The shape asked at construction (fixed: no lease needed).
  size_t count() const { return count_; }
  size_t buffer_bytes() const { return buffer_bytes_; }

  // Whether the buffers exist (for tests). Never waits: a log callback
  // called while another thread holds the lease may ask.
  bool allocated() const { return allocated_.load(std::memory_order_acquire); }

 private:
  bool allocate_locked(StagingDevice& dev, std::string* failure);
  void free_locked(StagingDevice& dev) noexcept;

  const size_t buffer_bytes_;
  const size_t count_;
  std::mutex mutex_;                    // held by a Lease
  std::atomic<bool> allocated_{false};  // !buffers_.empty(), written under mutex_
  std::vector<StagingBuffer> buffers_;  // under mutex_
  bool failed_ = false;                 // under mutex_
};

}  // namespace metrale::core::staging
