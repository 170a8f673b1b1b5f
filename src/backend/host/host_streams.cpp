// Streams and events. Work runs at enqueue, so by the time any call returns
// the stream has finished everything put on it before: synchronizing waits
// only for an op another thread is running on it right now (a host kernel),
// and an event is complete once its latest record is past any such op:
// waiting on it waits for that op.
#include <chrono>
#include <mutex>

#include "backend/host/host_backend.hpp"

namespace metrale::backend::host {

StreamHandle HostBackend::stream_create() {
  fault_.throw_if_lost();
  return streams_.add(std::make_shared<HostStream>(this));
}

// The host has no native streams. Native 0 (the NULL stream of a CUDA
// program) stands for "the default stream" and gets a stream of its own,
// which core destroys when the wrap ends; any other value names nothing
// here.
StreamHandle HostBackend::stream_wrap(uint64_t native, bool* owned) {
  if (native != 0) {
    fail(METRALE_ERROR_UNSUPPORTED,
         "host backend: native streams do not exist here; only native 0 (the NULL stream) "
         "can be wrapped, as a stream of its own");
  }
  StreamHandle h = stream_create();
  *owned = true;
  return h;
}

// Allowed on a lost context. A capture still open on the stream is dropped
// with it, as destroying a capturing CUDA stream invalidates the capture.
void HostBackend::stream_destroy(StreamHandle s) { streams_.take(s); }

void HostBackend::stream_synchronize(StreamHandle s) {
  auto stream = usable_stream(s);
  // The op this thread is running (a host kernel) is part of the stream's
  // work: the wait could only end by returning before it finished.
  if (stream->mutex.held_here()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: stream synchronize called from a host kernel running on that stream; "
         "it would wait for the kernel itself");
  }
  std::lock_guard<StreamLock> lock(stream->mutex);
  if (stream->capturing) {
    // cuStreamSynchronize of a capturing stream fails and invalidates the
    // capture: the same here, so that a caller's refusal is what keeps it.
    stream->capture_invalidated = true;
    fail(METRALE_ERROR_CAPTURE,
         "stream is capturing; end or abort the capture first (the capture is invalidated)");
  }
}

// Without the stream's lock: a host kernel running on the stream in another
// thread may be waiting for a lock the caller holds (the pool's).
bool HostBackend::stream_is_capturing(StreamHandle s) {
  auto stream = usable_stream(s);
  return stream->capturing.load(std::memory_order_acquire);
}

EventHandle HostBackend::event_create(bool timing) {
  fault_.throw_if_lost();
  return events_.add(std::make_shared<HostEvent>(timing));
}

namespace {

// Until the event's latest record is stamped (see event_record).
void wait_for_latest_record(HostEvent& event, const char* call) {
  std::shared_ptr<HostStream> on = event.pending_on();
  if (on == nullptr) return;
  if (on->mutex.held_here()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: ") + call +
             " called from a host kernel running on the stream the event was recorded on "
             "after it; it would wait for the kernel itself");
  }
  std::lock_guard<StreamLock> lock(on->mutex);
}

}  // namespace

bool HostBackend::in_stream_work(StreamHandle s) {
  // The common answer, with no lookup: this thread runs no work of ours.
  if (!StreamLock::any_held_here(this)) return false;
  if (s == 0) return true;
  try {
    return streams_.get(s)->mutex.held_here();
  } catch (const Error&) {
    return false;  // not a stream of this backend
  }
}

void HostBackend::event_destroy(EventHandle e) { events_.take(e); }

// Stamped when the stream reaches it: now, after the host kernel running
// there in another thread (without waiting for it, as the driver's record
// never waits), or at replay when captured.
void HostBackend::event_record(EventHandle e, StreamHandle s) {
  std::shared_ptr<HostStream> stream = usable_stream(s);
  std::shared_ptr<HostEvent> event = events_.get(e);
  const uint64_t n = event->begin_record(stream);  // until stamped: not complete
  stream->mutex.run_or_defer([stream, event, n] {
    if (!stream->capturing) return event->stamp_record(n);
    event->end_record_unstamped(n);
    stream->captured.emplace_back([event] { event->stamp(); });
  });
}

// A record left behind a host kernel of another thread is stamped before
// that thread lets the stream go: holding the stream's lock once is the wait.
void HostBackend::event_synchronize(EventHandle e) {
  fault_.throw_if_lost();
  wait_for_latest_record(*events_.get(e), "event synchronize");
}

bool HostBackend::event_query(EventHandle e) {
  fault_.throw_if_lost();
  if (events_.get(e)->pending_on() != nullptr) return false;
  return true;
}

float HostBackend::event_elapsed_ms(EventHandle start, EventHandle end) {
  fault_.throw_if_lost();
  std::shared_ptr<HostEvent> first = events_.get(start);
  std::shared_ptr<HostEvent> last = events_.get(end);
  if (!first->timing) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: elapsed_ms: the start event has timing disabled");
  }
  if (!last->timing) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: elapsed_ms: the end event has timing disabled");
  }
  std::chrono::steady_clock::time_point t0, t1;
  if (!first->recorded_at(&t0)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: elapsed_ms: the start event was never recorded");
  }
  if (!last->recorded_at(&t1)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: elapsed_ms: the end event was never recorded");
  }
  return std::chrono::duration<float, std::milli>(t1 - t0).count();
}

// Work on a host stream runs when it is called, so the stream waits by its
// caller waiting: for a record left behind a host kernel on another stream.
// Nothing to wait for on the record's own stream (its work is in order) or
// in a capture (the ops run at replay, in order).
void HostBackend::stream_wait_event(StreamHandle s, EventHandle e) {
  std::shared_ptr<HostStream> stream = usable_stream(s);
  std::shared_ptr<HostEvent> event = events_.get(e);
  if (!stream->capturing && event->in_capture()) {
    // On cuda the wait joins the stream to the capture (fork/join); here a
    // capture records one stream's ops, so the joined work would run now
    // and never replay.
    fail(METRALE_ERROR_UNSUPPORTED,
         "host backend: the event's latest record is in a capture, and a stream that is not "
         "capturing cannot join it (fork/join capture is not supported on the host backend; "
         "capture the work on one stream)");
  }
  if (stream->capturing || event->pending_on() == stream) return;
  wait_for_latest_record(*event, "stream wait event");
}

}  // namespace metrale::backend::host
