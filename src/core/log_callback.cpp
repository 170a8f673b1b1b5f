#include "core/log_callback.hpp"

#include "backend/backend.hpp"
#include "backend/error.hpp"

namespace metrale::core {
namespace {
thread_local bool t_inside = false;
}  // namespace

bool LogCallbackGate::inside_callback() { return t_inside; }

bool LogCallbackGate::deliver(metrale_log_level_t level, const char* text) {
  if (t_inside) return false;  // a line from a call made by the callback itself
  metrale_log_fn fn;
  void* user;
  uint64_t generation;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (fn_ == nullptr) return false;
    fn = fn_;
    user = user_;
    generation = generation_;
    ++running_[generation];
  }
  // Ends the call even when the callback throws (a C++ caller's callback).
  struct Done {
    LogCallbackGate* gate;
    uint64_t generation;
    ~Done() {
      t_inside = false;
      std::lock_guard<std::mutex> lock(gate->mutex_);
      auto it = gate->running_.find(generation);
      if (--it->second == 0) {
        gate->running_.erase(it);
        gate->drained_.notify_all();
      }
    }
  } done{this, generation};
  t_inside = true;
  fn(level, text, user);  // no lock held: the callback may call the library
  return true;
}

void LogCallbackGate::set(metrale_log_fn fn, void* user) {
  if (t_inside) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "metrale_log_set_callback called from inside the log callback: it would wait for "
         "the running callback, which is its own caller; set it from outside the callback");
  }
  if (metrale::backend::this_thread_runs_host_kernel()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "metrale_log_set_callback called from a host kernel: it waits for the running "
         "callbacks, and one on another thread may be waiting for this kernel's stream; set "
         "it from outside the kernel");
  }
  std::unique_lock<std::mutex> lock(mutex_);
  fn_ = fn;
  user_ = user;
  const uint64_t old = generation_++;
  // Calls that started with this callback or an earlier one must end; calls
  // of the new one (generation > old) need not.
  drained_.wait(lock, [&] { return running_.empty() || running_.begin()->first > old; });
}

}  // namespace metrale::core
