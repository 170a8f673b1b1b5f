// Streams, events and graphs: core objects wrapped around backend handles,
// named by handle values from this context's slot tables. A destroy kills
// the value for good (its serial is never issued again): a second destroy,
// or any later use, is INVALID_ARGUMENT and touches no other object.
#include <thread>

#include "core/context.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::fail;
using metrale::core::EventObj;
using metrale::core::GraphObj;
using metrale::core::StreamObj;
using metrale::core::handle_id::handle_from;
using metrale::core::handle_id::value_of;

namespace {

// Runs make() to publish a new object; a failure to publish gives the
// backend object back.
template <class Make, class Undo>
uint64_t publish(Make&& make, Undo&& undo) {
  try {
    return make();
  } catch (...) {
    try {
      undo();
    } catch (...) {
      // Already failing: the first error is the one to report.
    }
    throw;
  }
}

}  // namespace

metrale_stream* metrale_context::stream_create() {
  fault_.check();
  StreamHandle h = device([&] { return backend_->stream_create(); });
  if (pool_) pool_->stream_born(h);  // a retired stream's value, reused
  uint64_t v = publish(
      [&] {
        return streams_.insert([&](StreamObj& s) {
          s.owner = this;
          s.handle = h;
        });
      },
      [&] { backend_->stream_destroy(h); });
  if (StreamObj* o = streams_.find(v)) o->id = v;  // before the caller has the handle
  return handle_from<metrale_stream>(v);
}

void metrale_context::stream_destroy(metrale_stream* s) {
  if (s == nullptr) return;
  const StreamObj* st = stream_of(s);
  if (st->is_default) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "the default stream belongs to the context and is "
                                         "destroyed with it");
  }
  refuse_stream_destroy_in_own_work(st->handle);
  // A wrapped stream dies with its last wrap; the lock is held through the
  // whole destroy (stream_wrap.cpp).
  std::unique_lock<std::mutex> wrap_lock;
  if (st->wrapped) {
    wrap_lock = std::unique_lock<std::mutex>(wraps_mutex_);
    if (!drop_wrap(s, st)) return;
  }
  const bool owns_backend = st->owns_backend;
  StreamHandle h = 0;
  bool counted = false;
  if (!streams_.erase(value_of(s), [&](StreamObj& st) {
        h = st.handle;
        counted = st.capture_counted.exchange(false);
      })) {
    refuse_handle("stream", s);  // another thread destroyed it first
  }
  // The pool forgets the stream (the backend may reuse its handle value):
  // its cached blocks and the blocks ordered on it go to the default stream.
  if (counted) captures_open_.fetch_sub(1, std::memory_order_acq_rel);  // dies with it
  if (counted && owns_backend) {
    // Its capture dies with it anyway; closed first, so that the frees it
    // deferred (released below) can record their events on it instead of
    // failing with CAPTURE and leaving their blocks lost to the pool. A
    // wrapped stream's capture is left to the native stream's owner.
    try {
      backend_->capture_abort(h);
    } catch (const std::exception& ex) {
      metrale::core::log().debug("aborting the capture of a destroyed stream failed: {}", ex.what());
    }
  }
  // Its deferred frees first: a padded one joins the red-zone check list
  // naming h, which the retirement then moves to the default stream (a
  // check would otherwise free the block on the dead stream, and lose it).
  if (pool_) release_deferred(h);
  // The pool forgets it and the backend destroys it (stream_retire.cpp).
  retire_stream_handle(Retirement{h, owns_backend});
}

void metrale_context::stream_synchronize(metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  // Refused before the driver sees it: a cuStreamSynchronize of a capturing
  // stream fails AND invalidates the capture (probed), breaking rule 1.
  if (capturing(st)) {
    fail(METRALE_ERROR_CAPTURE, "stream is capturing; end or abort the capture first");
  }
  refuse_wait_in_own_work(st->handle, "metrale_stream_synchronize");
  sync(st->handle, "stream synchronize");
}

metrale_event* metrale_context::event_create(unsigned flags) {
  if (flags != METRALE_EVENT_DEFAULT && flags != METRALE_EVENT_DISABLE_TIMING) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "flags is " + std::to_string(flags) +
             "; known flags are METRALE_EVENT_DEFAULT (0) and METRALE_EVENT_DISABLE_TIMING (1)");
  }
  fault_.check();
  bool timing = flags == METRALE_EVENT_DEFAULT;
  EventHandle h = device([&] { return backend_->event_create(timing); });
  uint64_t v = publish(
      [&] {
        return events_.insert([&](EventObj& e) {
          e.owner = this;
          e.handle = h;
          e.timing = timing;
        });
      },
      [&] { backend_->event_destroy(h); });
  return handle_from<metrale_event>(v);
}

[[gnu::hot]] void metrale_context::event_record(metrale_event* e, metrale_stream* s) {
  fault_.check();
  EventObj* ev = event_of(e, "event");
  StreamObj* st = stream_of(s);
  device([&] { backend_->event_record(ev->handle, st->handle); });
  ev->recorded.store(true);
}

void metrale_context::event_synchronize(metrale_event* e) {
  fault_.check();
  EventObj* ev = event_of(e, "event");
  try {
    backend_->event_synchronize(ev->handle);
  } catch (const Error& err) {
    fail_after_probe(err, "event synchronize: ");
  }
}

bool metrale_context::event_query(metrale_event* e) {
  fault_.check();
  EventObj* ev = event_of(e, "event");
  return device([&] { return backend_->event_query(ev->handle); });
}

void metrale_context::event_destroy(metrale_event* e) {
  if (e == nullptr) return;
  EventHandle h = 0;
  if (!events_.erase(value_of(e), [&](EventObj& ev) { h = ev.handle; })) {
    refuse_handle("event", e);
  }
  release_event_handle(h);  // later, when calls racing the destroy are gone
}

void metrale_context::stream_wait_event(metrale_stream* s, metrale_event* e) {
  fault_.check();
  StreamObj* st = stream_of(s);
  EventObj* ev = event_of(e, "event");
  device([&] { backend_->stream_wait_event(st->handle, ev->handle); });
}

float metrale_context::event_elapsed_ms(metrale_event* start, metrale_event* end) {
  fault_.check();
  EventObj* a = event_of(start, "start");
  EventObj* b = event_of(end, "end");
  for (EventObj* ev : {a, b}) {
    const char* name = ev == a ? "start" : "end";
    if (!ev->timing) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           std::string(name) + " was created with METRALE_EVENT_DISABLE_TIMING");
    }
    if (!ev->recorded.load()) {
      fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(name) + " was never recorded");
    }
  }
  return device([&] { return backend_->event_elapsed_ms(a->handle, b->handle); });
}

void metrale_context::graph_begin_capture(metrale_stream* s) {
  fault_.check();
  StreamObj* st = stream_of(s);
  device([&] { backend_->capture_begin(st->handle); });
  if (!st->capture_counted.exchange(true)) captures_open_.fetch_add(1, std::memory_order_acq_rel);
}

// Counted down once the stream has left capture mode, whatever the end or
// abort answered (an ended-with-error capture is over too).
void metrale_context::note_capture_closed(StreamObj* st) noexcept {
  // Only a capture this stream counted: an end or abort on a stream that
  // was not capturing must not count down another stream's capture.
  if (!st->capture_counted.load(std::memory_order_acquire)) return;
  bool still = true;
  try {
    still = backend_->stream_is_capturing(st->handle);
  } catch (...) {
    still = false;  // a lost context captures nothing
  }
  if (!still && st->capture_counted.exchange(false)) {
    captures_open_.fetch_sub(1, std::memory_order_acq_rel);
    release_deferred(st->handle);
  }
}

metrale_graph* metrale_context::graph_end_capture(metrale_stream* s) {
  fault_.check();
  StreamObj* st = stream_of(s);
  // The graph's slot before the capture ends: short of memory, the call
  // fails with the capture still open and what it recorded kept (rule 1).
  auto slot = graphs_.reserve();
  metrale::backend::GraphHandle h = 0;
  try {
    h = device([&] { return backend_->capture_end(st->handle); });
  } catch (...) {
    note_capture_closed(st);
    throw;
  }
  note_capture_closed(st);
  const uint64_t v = graphs_.insert(std::move(slot), [&](GraphObj& g) {
    g.owner = this;
    g.handle = h;
  });
  return handle_from<metrale_graph>(v);
}

void metrale_context::graph_abort_capture(metrale_stream* s) {
  fault_.check();
  StreamObj* st = stream_of(s);
  try {
    device([&] { backend_->capture_abort(st->handle); });
  } catch (...) {
    note_capture_closed(st);
    throw;
  }
  note_capture_closed(st);
}

void metrale_context::graph_launch(metrale_graph* g, metrale_stream* s) {
  fault_.check();
  GraphObj* gr = graph_of(g);
  // Counted before the second look: a destroy that erased the handle
  // before the count sees it refused here; one after it waits (below).
  gr->launching.fetch_add(1, std::memory_order_relaxed);
  std::atomic_thread_fence(std::memory_order_seq_cst);
  struct Done {
    GraphObj* gr;
    ~Done() { gr->launching.fetch_sub(1, std::memory_order_release); }
  } done{gr};
  if (graphs_.find(value_of(g)) != gr) refuse_handle("graph", g);
  auto* st = stream_of(s);
  // The driver answers a graph launch into a capture with
  // STREAM_CAPTURE_UNSUPPORTED and invalidates the capture (probed on an
  // H200): both backends refuse it before anything is recorded.
  if (capturing(st)) {
    fail(METRALE_ERROR_CAPTURE,
         "graph launch into a capturing stream is not supported; nothing was recorded. "
         "Launch the graph before beginning or after ending the capture");
  }
  try {
    backend_->graph_launch(gr->handle, st->handle);
  } catch (const Error& e) {
    fail_after_probe(e, "graph launch: ");
  }
  metrale::core::Counters::bump(counters_.graph_launches);
}

void metrale_context::graph_destroy(metrale_graph* g) {
  if (g == nullptr) return;
  metrale::backend::GraphHandle h = 0;
  GraphObj* obj = nullptr;
  if (!graphs_.erase(value_of(g), [&](GraphObj& gr) {
        h = gr.handle;
        obj = &gr;
      })) {
    refuse_handle("graph", g);
  }
  // A launch on another thread that found the graph live still uses its
  // backend handle (a CUgraphExec destroyed under it can crash the driver):
  // its call ends within a driver call. From a host kernel, which such a
  // launch may be waiting for, the host backend's own references suffice.
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!backend_->in_stream_work(0)) {
    while (obj->launching.load(std::memory_order_acquire) > 0) std::this_thread::yield();
  }
  try {
    backend_->graph_destroy(h);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
    if (!fault_.lost()) throw;
  }
}
