// Per-kernel timing with bounded memory: a timed launch records two events
// around the kernel; the span waits in a per-stream queue until it is
// resolved into its kernel's row (launches, total ms). Three caps keep a
// long run from growing without end:
//   - at most kMaxPending spans wait at once; when full, the launch path
//     resolves the spans that already finished (non-blocking queries, in
//     stream order) and, when still full, launches untimed and the caller
//     counts the timing as dropped;
//   - at most kMaxKernels rows; a new kernel past it is not timed (dropped);
//   - at most kMaxIdleEvents finished events are kept for reuse; extra
//     ones are destroyed.
// No event is waited for, and no driver call made, while mutex_ is held;
// resolve_mutex_ lets one resolver at a time pop spans (the launch path only
// ever try-locks it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "metrale_gpu.h"

namespace metrale::core {

class KernelTimer {
 public:
  using EventHandle = backend::EventHandle;
  using StreamHandle = backend::StreamHandle;

  static constexpr size_t kMaxPending = 4096;
  static constexpr size_t kMaxKernels = 1024;
  static constexpr size_t kMaxIdleEvents = 2 * kMaxPending;
  static constexpr size_t kNoRow = SIZE_MAX;

  // The row of `kernel` (made on its first timed launch); kNoRow when the
  // table is full and it has none.
  size_t row_for(const void* kernel, const char* name);
  // Reserves a pending slot for one timed launch; false (nothing reserved)
  // when the spans are at the cap even after resolving the finished ones.
  // Never blocks; errors from the backend while resolving are swallowed
  // (the launch that follows reports a lost context itself).
  bool reserve(backend::Backend& b);
  // Gives back a reservation whose launch was not made.
  void unreserve();
  // An event for a span: an idle one, else a new timing event. Throws.
  EventHandle take_event(backend::Backend& b);
  // Returns an unused event to the idle list (destroyed when it is full).
  void give_back(backend::Backend& b, EventHandle e) noexcept;
  // Turns a reservation into a pending span on stream s. Short of memory it
  // throws having changed nothing: the reservation and the events stay the
  // caller's.
  void push(StreamHandle s, size_t row, EventHandle start, EventHandle end);
  // Waits for and resolves every span pushed before the call. Throws the
  // backend's error (the spans not resolved stay pending).
  void resolve_all(backend::Backend& b);
  // Copies up to cap rows in first-launch order; returns the row count.
  size_t read(metrale_kernel_timing_t* out, size_t cap) const;
  // Destroys every event (context teardown).
  void release(backend::Backend& b) noexcept;

  // For tests and logs: spans waiting and idle events held now.
  size_t pending() const;
  size_t idle_events() const;

 private:
  struct Span {
    uint64_t ticket;
    size_t row;
    EventHandle start, end;
  };
  // Resolves spans front first on each stream: when waiting, those with a
  // ticket <= last; else only the finished ones (a stream's later spans
  // cannot finish before its first unfinished one). resolve_mutex_ held.
  void resolve_locked(backend::Backend& b, bool wait, uint64_t last);
  // Pops the front span of s, adds its time, recycles its events.
  void finish_front(backend::Backend& b, StreamHandle s, double ms);

  mutable std::mutex mutex_;  // everything below except resolve_mutex_
  std::mutex resolve_mutex_;
  std::map<StreamHandle, std::deque<Span>> queues_;
  size_t queued_ = 0;
  size_t reserved_ = 0;
  uint64_t next_ticket_ = 1;
  std::vector<EventHandle> idle_;
  std::vector<metrale_kernel_timing_t> rows_;
  std::unordered_map<const void*, size_t> row_of_;
};

}  // namespace metrale::core
