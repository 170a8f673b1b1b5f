// Streams, events and graphs of the host backend. A stream runs the work put
// on it at once, in the caller's thread; its lock is held while an op runs
// so that two threads never interleave one stream's ops. While the stream is
// capturing, ops are recorded instead and a graph replays them.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <mutex>
#include <utility>
#include <vector>

#include "backend/host/stream_lock.hpp"

namespace metrale::backend::host {

// One unit of stream work. Everything it needs is captured by value, so a
// recorded op replays after the enqueueing call has returned.
using StreamOp = std::function<void()>;

struct HostStream {
  explicit HostStream(const void* backend) : mutex(backend) {}

  // Recursive so that a host kernel calling back into the library on its own
  // stream runs that work nested, in order, instead of deadlocking; it also
  // tells which thread runs the stream's work (see stream_lock.hpp).
  StreamLock mutex;
  // Changed under mutex; read without it too (stream_is_capturing, which
  // must not wait for a host kernel running on the stream).
  std::atomic<bool> capturing{false};
  std::vector<StreamOp> captured;  // under mutex

  // Runs op now, in this thread, or records it when the stream is capturing.
  template <typename Op>
  void submit(Op&& op) {
    std::lock_guard<StreamLock> lock(mutex);
    if (capturing) {
      captured.emplace_back(std::forward<Op>(op));
    } else {
      op();
    }
  }
  // The same, except that while another thread runs this stream's work, op
  // is left to that thread (StreamLock::run_or_defer): never waits. op must
  // not throw.
  void submit_or_defer(StreamOp op) {
    mutex.run_or_defer([this, op = std::move(op)]() mutable {
      if (capturing) {
        captured.emplace_back(std::move(op));
      } else {
        op();
      }
    });
  }
};

struct HostEvent {
  explicit HostEvent(bool timing_enabled) : timing(timing_enabled) {}

  void stamp() {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    when = now;
    recorded = true;
  }

  // False when never recorded.
  bool recorded_at(std::chrono::steady_clock::time_point* out) {
    std::lock_guard<std::mutex> lock(mutex);
    if (recorded) *out = when;
    return recorded;
  }

  const bool timing;
  std::mutex mutex;
  bool recorded = false;                       // under mutex
  std::chrono::steady_clock::time_point when;  // under mutex
};

// An instantiated capture: the recorded ops, replayed in order.
struct HostGraph {
  explicit HostGraph(std::vector<StreamOp> recorded) : ops(std::move(recorded)) {}

  void replay() const {
    for (const StreamOp& op : ops) op();
  }

  const std::vector<StreamOp> ops;
};

}  // namespace metrale::backend::host
