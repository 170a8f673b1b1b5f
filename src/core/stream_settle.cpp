// A scan's wait for the work on the context's streams (their kernels write
// the pads it reads), beside other threads that destroy streams.
//
// A backend stream handle dies some time after its destroy
// (backend_release.cpp); a driver call with a dead CUstream can crash in
// the driver, and a scan's wait may outlast any number of destroys on
// other threads. So the handles are read and an event is queued on each
// under stream_handles_mutex_, without which no backend destroy runs, and
// the events (the scan's own) are waited for after it is let go: the mutex
// is never held across a wait, and a destroy never waits for it. Capturing
// streams are left alone (an event recorded there would join the capture;
// a sync would break it), and so is the whole device context: a
// cuCtxSynchronize would invalidate a capture running on another thread.
#include <exception>

#include "core/context.hpp"

using metrale::Error;

size_t metrale_context::settle_streams_before_scan() {
  std::vector<EventHandle> marks;
  std::exception_ptr failed;
  {
    std::lock_guard<std::mutex> hold(stream_handles_mutex_);  // no backend destroy meanwhile
    const std::vector<metrale::core::StreamObj*> live = streams_.live();
    marks.reserve(live.size());
    settle_events_.reserve(settle_events_.size() + live.size());  // their way back cannot fail
    for (metrale::core::StreamObj* st : live) {
      const StreamHandle h = st->handle;
      EventHandle ev = 0;
      try {
        if (settle_events_.empty()) ev = backend_->event_create(false);
      } catch (...) {
        // No event to wait with (out of device or host memory): the events
        // recorded so far go back below, the scan fails having done nothing.
        failed = std::current_exception();
        break;
      }
      if (ev == 0) {
        ev = settle_events_.back();
        settle_events_.pop_back();
      }
      try {
        if (backend_->stream_is_capturing(h)) {
          settle_events_.push_back(ev);
          continue;
        }
        backend_->event_record(ev, h);
        marks.push_back(ev);
      } catch (const Error& e) {
        settle_events_.push_back(ev);
        // Began capturing meanwhile, say: nothing of it to wait for. A lost
        // context is the scan's error.
        if (e.status() != METRALE_ERROR_CONTEXT_LOST) continue;
        failed = std::current_exception();
        break;
      } catch (...) {
        settle_events_.push_back(ev);  // reserved: cannot throw
        failed = std::current_exception();  // short of host memory
        break;
      }
    }
  }
  size_t waits = 0;
  for (EventHandle ev : marks) {
    if (failed != nullptr) break;
    ++waits;
    try {
      backend_->event_synchronize(ev);
    } catch (const Error&) {
      failed = std::current_exception();
    }
  }
  {
    std::lock_guard<std::mutex> hold(stream_handles_mutex_);
    for (EventHandle ev : marks) settle_events_.push_back(ev);
  }
  if (failed == nullptr) return waits;
  // A wait that failed (CONTEXT_LOST, DRIVER) counts, as a synchronous
  // call's failed wait does (rule 1's exception); short of memory, none ran.
  metrale::core::Counters::bump(counters_.stream_syncs, waits);
  try {
    std::rethrow_exception(failed);
  } catch (const Error& e) {
    fail_after_probe(e, "red-zone scan: ");
  }
}
