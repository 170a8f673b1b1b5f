#include "core/fast_mutex.hpp"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <thread>

namespace metrale::core {

namespace {

void futex(std::atomic<uint32_t>* word, int op, uint32_t value) noexcept {
  static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t), "futex word");
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), op | FUTEX_PRIVATE_FLAG, value, nullptr,
          nullptr, 0);
}

}  // namespace

void FastMutex::lock_contended() noexcept {
  // A spin first: the ledger's critical sections are ~100 ns, so a holder
  // on another core is usually out before a sleep would pay off. Each look
  // at the lock word pulls its cache line away from the holder, whose
  // unlock then waits for it back: with one look per pause, two threads
  // doing pooled pairs spent most of their time in that line's transfers
  // (279 ns a pair against 50 ns on one thread, on a 2-core host). So the
  // pauses between looks double, up to 256 (~1300 pauses in all before
  // the sleep; glibc's adaptive mutex backs off the same way).
  for (int i = 0, pauses = 1; i < 12; ++i, pauses = pauses < 256 ? 2 * pauses : pauses) {
    uint32_t expected = kFree;
    if (state_.load(std::memory_order_relaxed) == kFree &&
        state_.compare_exchange_weak(expected, kLocked, std::memory_order_acquire,
                                     std::memory_order_relaxed)) {
      return;
    }
#if defined(__x86_64__) || defined(__i386__)
    for (int k = 0; k < pauses; ++k) __builtin_ia32_pause();
#endif
  }
  // Then sleep: mark the lock as having waiters, so the unlock wakes one.
  while (state_.exchange(kWaiters, std::memory_order_acquire) != kFree) {
    futex(&state_, FUTEX_WAIT, kWaiters);
  }
}

void FastMutex::wake_one() noexcept { futex(&state_, FUTEX_WAKE, 1); }

}  // namespace metrale::core
