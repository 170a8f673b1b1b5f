#include "backend/host/stream_lock.hpp"

#include <condition_variable>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "backend/error.hpp"

namespace metrale::backend::host {
namespace {

// One registry for every host backend: a cycle may run through streams of
// two contexts. Stream ops are short, so one mutex for the bookkeeping is
// cheap; it is never held while an op runs.
struct Registry {
  std::mutex mutex;
  std::condition_variable released;
  // The lock each blocked thread waits for.
  std::unordered_map<std::thread::id, const StreamLock*> waiting;
};

Registry& registry() {
  static Registry* r = new Registry;  // never destroyed: streams may outlive statics
  return *r;
}

// The locks this thread holds, the latest taken first, linked through
// their next_held_. Plain thread_local data with no destructor, not a
// vector: a thread's last calls may come from a pthread key destructor,
// which runs after its C++ thread_local objects were destroyed (the
// vector's storage was then written after its free).
thread_local const StreamLock* t_first_held = nullptr;

}  // namespace

bool StreamLock::would_deadlock(std::thread::id me) const {
  const Registry& r = registry();
  // Follow holder -> the lock it waits for -> its holder ... A chain that
  // comes back to this thread is a cycle; any other chain ends (a thread
  // that is not waiting) or loops elsewhere (bounded by the waiters).
  const StreamLock* at = this;
  for (size_t steps = 0; steps <= r.waiting.size(); ++steps) {
    if (at->depth_ == 0) return false;
    if (at->holder_ == me) return true;
    auto next = r.waiting.find(at->holder_);
    if (next == r.waiting.end()) return false;
    at = next->second;
  }
  return false;
}

void StreamLock::lock() {
  Registry& r = registry();
  const std::thread::id me = std::this_thread::get_id();
  std::unique_lock<std::mutex> guard(r.mutex);
  if (depth_ != 0 && holder_ == me) {
    ++depth_;
    return;
  }
  while (depth_ != 0) {
    if (would_deadlock(me)) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "host backend: waiting for this stream would deadlock: its work is running on "
           "another thread, in a host kernel that waits (directly or through other threads) "
           "for a stream whose work this thread is running (a host kernel calling back in)");
    }
    r.waiting[me] = this;
    r.released.wait(guard);
    r.waiting.erase(me);
  }
  holder_ = me;
  depth_ = 1;
  push_held();
}

void StreamLock::push_held() {
  next_held_ = t_first_held;
  t_first_held = this;
}

void StreamLock::drop_held() {
  for (const StreamLock** at = &t_first_held; *at != nullptr; at = &(*at)->next_held_) {
    if (*at == this) {
      *at = next_held_;
      next_held_ = nullptr;
      return;
    }
  }
}

void StreamLock::unlock() {
  Registry& r = registry();
  std::unique_lock<std::mutex> guard(r.mutex);
  // Ops other threads left while this one ran the stream's work: run before
  // the lock goes, still holding it.
  while (depth_ == 1 && !deferred_.empty()) {
    std::vector<std::function<void()>> ops;
    ops.swap(deferred_);
    guard.unlock();
    for (std::function<void()>& op : ops) {
      try {
        op();
      } catch (...) {
        // Its caller has returned: nobody to tell (an event record that
        // found no memory to join a capture is missing from it).
      }
    }
    guard.lock();
  }
  if (--depth_ != 0) return;
  holder_ = std::thread::id();
  drop_held();
  if (!r.waiting.empty()) r.released.notify_all();
}

void StreamLock::run_or_defer(std::function<void()> op) {
  Registry& r = registry();
  const std::thread::id me = std::this_thread::get_id();
  {
    std::lock_guard<std::mutex> guard(r.mutex);
    if (depth_ != 0 && holder_ != me) {
      deferred_.push_back(std::move(op));
      return;
    }
    if (depth_++ == 0) {
      holder_ = me;
      push_held();
    }
  }
  struct Release {
    StreamLock* lock;
    ~Release() { lock->unlock(); }
  } release{this};
  op();
}

bool StreamLock::any_held_by_this_thread() { return t_first_held != nullptr; }

bool StreamLock::held_here() const {
  for (const StreamLock* l = t_first_held; l != nullptr; l = l->next_held_) {
    if (l == this) return true;
  }
  return false;
}

bool StreamLock::any_held_here(const void* owner) {
  for (const StreamLock* l = t_first_held; l != nullptr; l = l->next_held_) {
    if (l->owner_ == owner) return true;
  }
  return false;
}

}  // namespace metrale::backend::host

namespace metrale::backend {

bool this_thread_runs_host_kernel() { return host::StreamLock::any_held_by_this_thread(); }

}  // namespace metrale::backend
