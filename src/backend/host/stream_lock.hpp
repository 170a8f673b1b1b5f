// The lock a host stream is held with while one of its ops runs (and while
// its capture state changes). Host streams run work in the thread that puts
// it on them, and a host kernel is an op: while it runs, its thread holds
// the stream's lock and runs the caller's code, which may call back into
// the library. So, unlike a std::recursive_mutex, this lock
//  - knows its holder: the backend can tell that the calling thread is
//    running work of a stream (a host kernel that called back in), and of
//    which backend;
//  - refuses to wait when waiting would deadlock: when the thread holding
//    the stream waits (directly, or through other threads) for a stream
//    this thread holds. Two host kernels on two streams that each put work
//    on, or wait for, the other's stream: the one that would close the
//    cycle gets INVALID_ARGUMENT, the other goes on.
// Recursive: work a host kernel puts on its own stream runs nested, at once.
#pragma once

#include <functional>
#include <thread>
#include <vector>

namespace metrale::backend::host {

class StreamLock {
 public:
  // owner: the backend the stream belongs to (only compared).
  explicit StreamLock(const void* owner) : owner_(owner) {}
  StreamLock(const StreamLock&) = delete;
  StreamLock& operator=(const StreamLock&) = delete;

  // Waits for the lock; throws INVALID_ARGUMENT (holding nothing new) when
  // the wait would never end.
  void lock();
  void unlock();

  // Runs op holding the lock when it is free or this thread holds it; when
  // another thread holds it (a host kernel running there), leaves op to
  // that thread, which runs it before it lets the lock go: op comes after
  // the running work, in stream order, and the caller never waits. For
  // ops a driver queues without waiting (an event record), which callers
  // holding locks of their own make (the pool's, under which a host kernel
  // may be waiting). What op throws reaches the caller when op ran at once;
  // a deferred op's exception is dropped (its caller has returned).
  void run_or_defer(std::function<void()> op);

  // Whether the calling thread holds this lock.
  bool held_here() const;
  // Whether the calling thread holds the lock of any host stream: it is
  // running a host kernel.
  static bool any_held_by_this_thread();
  // Whether the calling thread holds the lock of any stream of owner.
  static bool any_held_here(const void* owner);

 private:
  bool would_deadlock(std::thread::id me) const;
  // This lock joins / leaves the calling thread's list of held locks.
  void push_held();
  void drop_held();

  const void* const owner_;
  std::thread::id holder_;  // under the registry mutex (stream_lock.cpp)
  unsigned depth_ = 0;      // under the registry mutex
  std::vector<std::function<void()>> deferred_;  // run_or_defer's; under the registry mutex
  // The next lock in its holder's list of held locks (stream_lock.cpp); read
  // and written only by the thread holding this lock.
  mutable const StreamLock* next_held_ = nullptr;
};

}  // namespace metrale::backend::host
