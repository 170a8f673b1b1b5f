// Streams, events and graphs of the host backend. A stream runs the work put
// on it at once, in the caller's thread; its lock is held while an op runs
// so that two threads never interleave one stream's ops. While the stream is
// capturing, ops are recorded instead and a graph replays them.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
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
  // A synchronize of the capturing stream (refused) broke the capture, as
  // the driver's does: its end fails (under mutex).
  bool capture_invalidated = false;

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
};

struct HostEvent {
  explicit HostEvent(bool timing_enabled) : timing(timing_enabled) {}

  // A replay of a captured record: always the latest.
  void stamp() {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    when = now;
    recorded = true;
    pending.reset();
    captured = false;
  }

  // A record on `on`, pending (not complete for event_query) until its
  // stamp, which may be left to the thread running a host kernel there.
  // Returns the record's number: only the latest record's stamp counts, so
  // an earlier record's late stamp never completes a later one.
  uint64_t begin_record(std::shared_ptr<HostStream> on) {
    std::lock_guard<std::mutex> lock(mutex);
    pending = std::move(on);
    captured = false;
    return ++records;
  }
  void stamp_record(uint64_t n) {
    const auto now = std::chrono::steady_clock::now();
    std::lock_guard<std::mutex> lock(mutex);
    if (n != records) return;
    when = now;
    recorded = true;
    pending.reset();
  }
  // Record n went into a capture instead: nothing pending (as before).
  void end_record_unstamped(uint64_t n) {
    std::lock_guard<std::mutex> lock(mutex);
    if (n == records) {
      pending.reset();
      captured = true;
    }
  }
  // The latest record went into a capture (not replayed since).
  bool in_capture() {
    std::lock_guard<std::mutex> lock(mutex);
    return captured;
  }
  std::shared_ptr<HostStream> pending_on() {
    std::lock_guard<std::mutex> lock(mutex);
    return pending;
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
  std::shared_ptr<HostStream> pending;         // under mutex
  uint64_t records = 0;                        // under mutex
  bool captured = false;                       // under mutex
  std::chrono::steady_clock::time_point when;  // under mutex
};

// An instantiated capture: the recorded ops, replayed in order.
struct HostGraph {
  void replay() const {
    for (const StreamOp& op : ops) op();
  }

  // Filled once, by capture_end, before its handle is returned.
  std::vector<StreamOp> ops;
};

}  // namespace metrale::backend::host
