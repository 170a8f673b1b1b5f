// Streams, events and graphs: core handles wrapped around backend handles.
#include "core/context.hpp"

using metrale::Error;
using metrale::fail;

metrale_stream* metrale_context::stream_create() {
  fault_.check();
  StreamHandle h = device([&] { return backend_->stream_create(); });
  metrale_stream* s = streams_.acquire();
  s->owner = this;
  s->handle = h;
  s->is_default = false;
  s->alive.store(true, std::memory_order_release);
  return s;
}

void metrale_context::stream_destroy(metrale_stream* s) {
  if (s == nullptr) return;
  metrale_stream* st = stream_of(s);
  if (st->is_default) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "the default stream belongs to the context and is "
                                         "destroyed with it");
  }
  refuse_stream_destroy_in_own_work(st->handle);
  bool expected = true;
  if (!st->alive.compare_exchange_strong(expected, false)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "stream was destroyed");
  }
  StreamHandle h = st->handle;
  streams_.release(st);
  // A lost context still gives the handle back: destroy is a release, not work.
  try {
    backend_->stream_destroy(h);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
    if (!fault_.lost()) throw;
  }
}

void metrale_context::stream_synchronize(metrale_stream* s) {
  fault_.check();
  metrale_stream* st = stream_of(s);
  // Refused before the driver sees it: a cuStreamSynchronize of a capturing
  // stream fails AND invalidates the capture (probed), breaking rule 1.
  if (capturing(st)) {
    fail(METRALE_ERROR_CAPTURE, "stream is capturing; end or abort the capture first");
  }
  refuse_wait_in_own_work(st->handle, "metrale_stream_synchronize");
  sync(st->handle, "stream synchronize");
}

bool metrale_context::stream_is_capturing(metrale_stream* s) {
  metrale_stream* st = stream_of(s);
  if (fault_.lost()) return true;  // a failed query counts as capturing
  try {
    return backend_->stream_is_capturing(st->handle);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
    return true;
  }
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
  metrale_event* e = events_.acquire();
  e->owner = this;
  e->handle = h;
  e->timing = timing;
  e->recorded.store(false);
  e->alive.store(true, std::memory_order_release);
  return e;
}

void metrale_context::event_record(metrale_event* e, metrale_stream* s) {
  fault_.check();
  metrale_event* ev = event_of(e, "event");
  metrale_stream* st = stream_of(s);
  device([&] { backend_->event_record(ev->handle, st->handle); });
  ev->recorded.store(true);
}

void metrale_context::event_synchronize(metrale_event* e) {
  fault_.check();
  metrale_event* ev = event_of(e, "event");
  try {
    backend_->event_synchronize(ev->handle);
  } catch (const Error& err) {
    fail_after_probe(err, "event synchronize: ");
  }
}

bool metrale_context::event_query(metrale_event* e) {
  fault_.check();
  metrale_event* ev = event_of(e, "event");
  return device([&] { return backend_->event_query(ev->handle); });
}

void metrale_context::event_destroy(metrale_event* e) {
  if (e == nullptr) return;
  metrale_event* ev = event_of(e, "event");
  bool expected = true;
  if (!ev->alive.compare_exchange_strong(expected, false)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "event was destroyed");
  }
  EventHandle h = ev->handle;
  events_.release(ev);
  try {
    backend_->event_destroy(h);
  } catch (const Error& err) {
    if (err.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(err.what());
    if (!fault_.lost()) throw;
  }
}

void metrale_context::stream_wait_event(metrale_stream* s, metrale_event* e) {
  fault_.check();
  metrale_stream* st = stream_of(s);
  metrale_event* ev = event_of(e, "event");
  device([&] { backend_->stream_wait_event(st->handle, ev->handle); });
}

float metrale_context::event_elapsed_ms(metrale_event* start, metrale_event* end) {
  fault_.check();
  metrale_event* a = event_of(start, "start");
  metrale_event* b = event_of(end, "end");
  for (metrale_event* ev : {a, b}) {
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
  metrale_stream* st = stream_of(s);
  device([&] { backend_->capture_begin(st->handle); });
}

metrale_graph* metrale_context::graph_end_capture(metrale_stream* s) {
  fault_.check();
  metrale_stream* st = stream_of(s);
  metrale::backend::GraphHandle h = device([&] { return backend_->capture_end(st->handle); });
  metrale_graph* g = graphs_.acquire();
  g->owner = this;
  g->handle = h;
  g->alive.store(true, std::memory_order_release);
  return g;
}

void metrale_context::graph_abort_capture(metrale_stream* s) {
  fault_.check();
  metrale_stream* st = stream_of(s);
  device([&] { backend_->capture_abort(st->handle); });
}

void metrale_context::graph_launch(metrale_graph* g, metrale_stream* s) {
  fault_.check();
  metrale_graph* gr = graph_of(g);
  metrale_stream* st = stream_of(s);
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
  metrale_graph* gr = graph_of(g);
  bool expected = true;
  if (!gr->alive.compare_exchange_strong(expected, false)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "graph was destroyed");
  }
  metrale::backend::GraphHandle h = gr->handle;
  graphs_.release(gr);
  try {
    backend_->graph_destroy(h);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
    if (!fault_.lost()) throw;
  }
}
