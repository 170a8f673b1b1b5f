#include "core/thread_slot.hpp"

#include <pthread.h>

#include <mutex>

namespace metrale::core::thread_slot_detail {

namespace {

std::mutex g_mutex;
uint64_t g_taken = 0;  // bit i: slot i has an owner
static_assert(ThreadSlot::kSlots == 64, "one bit per slot in g_taken");

// Gives the slot back at thread exit. A non-trivial thread_local: only
// touched here, on a thread's first call, so its slower TLS access is paid
// once per thread.
struct Owner {
  uint32_t slot = ThreadSlot::kShared;
  ~Owner() {
    if (slot == ThreadSlot::kShared) return;
    // A later call on this thread (another thread_local's destructor)
    // must not write the line of the slot's next owner.
    t_slot = ThreadSlot::kShared;
    std::lock_guard<std::mutex> lock(g_mutex);
    g_taken &= ~(uint64_t{1} << slot);
  }
};
thread_local Owner t_owner;

// fork(): the child has one thread, the forking one. The lock must not be
// held by a thread that is not there (the prepare handler takes it), and
// the other threads' slots are free again.
void fork_prepare() { g_mutex.lock(); }
void fork_parent() { g_mutex.unlock(); }
void fork_child() {
  const uint32_t mine = t_slot;
  g_taken = mine < ThreadSlot::kSlots ? uint64_t{1} << mine : 0;
  g_mutex.unlock();
}

}  // namespace

uint32_t take() noexcept {
  // Once per process; a function-local static, not std::call_once, which
  // may throw out of this noexcept function.
  static const int atfork = pthread_atfork(fork_prepare, fork_parent, fork_child);
  (void)atfork;
  uint32_t slot = ThreadSlot::kShared;
  {
    std::lock_guard<std::mutex> lock(g_mutex);
    if (g_taken != ~uint64_t{0}) {
      slot = static_cast<uint32_t>(__builtin_ctzll(~g_taken));
      g_taken |= uint64_t{1} << slot;
    }
  }
  t_owner.slot = slot;
  t_slot = slot;
  return slot;
}

}  // namespace metrale::core::thread_slot_detail
