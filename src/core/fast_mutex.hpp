// The lock of the ledger and the caching pool (one lock for both: see
// CachingPool's shared_lock), taken twice per pooled alloc+free pair.
//
// Why not std::mutex: glibc's pthread_mutex_lock/unlock are out-of-line
// calls of ~30 and ~20 instructions (type checks, elision, robust-list
// bookkeeping) around the one atomic operation that matters; on the pooled
// fast path they were a tenth of all instructions. This is the classic
// three-state futex mutex (Drepper, "Futexes Are Tricky", mutex 2): one
// inline compare-exchange to lock and one exchange to unlock when there is
// no contention; waiters spin with a doubling backoff for some tens of
// microseconds at most (fast_mutex.cpp says why), then sleep in the kernel. Not
// recursive. Meets the Lockable requirements, so std::lock_guard and
// std::unique_lock work with it. Linux only, like the rest of the library.
#pragma once

#include <atomic>
#include <cstdint>

namespace metrale::core {

class FastMutex {
 public:
  FastMutex() = default;
  FastMutex(const FastMutex&) = delete;
  FastMutex& operator=(const FastMutex&) = delete;

  void lock() noexcept {
    uint32_t expected = kFree;
    if (state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                       std::memory_order_relaxed)) {
      return;
    }
    lock_contended();
  }
  bool try_lock() noexcept {
    uint32_t expected = kFree;
    return state_.compare_exchange_strong(expected, kLocked, std::memory_order_acquire,
                                          std::memory_order_relaxed);
  }
  void unlock() noexcept {
    if (state_.exchange(kFree, std::memory_order_release) == kWaiters) wake_one();
  }

 private:
  static constexpr uint32_t kFree = 0, kLocked = 1, kWaiters = 2;
  [[gnu::noinline]] void lock_contended() noexcept;
  [[gnu::noinline]] void wake_one() noexcept;
  std::atomic<uint32_t> state_{kFree};
};

}  // namespace metrale::core
