// Events.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_event_create(metrale_context_t* ctx, unsigned flags,
                                                  metrale_event_t** out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->event_create(flags);
  });
}

METRALE_API __attribute__((hot)) metrale_status_t metrale_event_record(metrale_context_t* ctx, metrale_event_t* event,
                                                  metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->event_record(event, stream); });
}

METRALE_API metrale_status_t metrale_event_synchronize(metrale_context_t* ctx,
                                                       metrale_event_t* event) {
  return guarded([&] { live(ctx)->event_synchronize(event); });
}

METRALE_API metrale_status_t metrale_event_query(metrale_context_t* ctx, metrale_event_t* event,
                                                 int* done) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(done, "done");
    *done = c->event_query(event) ? 1 : 0;
  });
}

METRALE_API metrale_status_t metrale_event_destroy(metrale_context_t* ctx,
                                                   metrale_event_t* event) {
  return guarded([&] { live(ctx)->event_destroy(event); });
}

METRALE_API metrale_status_t metrale_stream_wait_event(metrale_context_t* ctx,
                                                       metrale_stream_t* stream,
                                                       metrale_event_t* event) {
  return guarded([&] { live(ctx)->stream_wait_event(stream, event); });
}

METRALE_API metrale_status_t metrale_event_elapsed_ms(metrale_context_t* ctx,
                                                      metrale_event_t* start,
                                                      metrale_event_t* end, float* ms) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(ms, "ms");
    *ms = c->event_elapsed_ms(start, end);
  });
}
