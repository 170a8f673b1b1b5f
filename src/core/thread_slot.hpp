// A small index of the calling thread, its own while it lives, for state
// that only its owner writes (sharded_counter.hpp). A thread takes a slot at
// its first call and gives it back when it exits; the next thread to take
// that slot continues after it (the hand-over is ordered by a mutex). Beyond
// kSlots threads at once, the rest get kShared and must use atomic updates.
// In a child of fork() only the forking thread keeps its slot.
#pragma once

#include <cstdint>

namespace metrale::core {

namespace thread_slot_detail {
constexpr uint32_t kUnset = ~uint32_t{0};
// Initial-exec TLS: one load off the thread pointer (see tags.hpp). Inline
// with its constant initializer in sight: no check for a TLS init function
// per read, as an extern declaration needs (a load from the GOT each).
inline thread_local uint32_t t_slot __attribute__((tls_model("initial-exec"))) = kUnset;
uint32_t take() noexcept;
}  // namespace thread_slot_detail

struct ThreadSlot {
  static constexpr uint32_t kSlots = 64;
  static constexpr uint32_t kShared = kSlots;  // no slot of its own

  // This thread's slot (< kSlots), or kShared. Lock-free after the first
  // call of a thread. Thread-safe, async-signal-unsafe on that first call.
  static uint32_t mine() noexcept {
    const uint32_t s = thread_slot_detail::t_slot;
    return s != thread_slot_detail::kUnset ? s : thread_slot_detail::take();
  }
};

}  // namespace metrale::core
