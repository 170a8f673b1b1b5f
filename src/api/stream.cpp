// Streams.
#include "api/guard.hpp"
#include "core/stream_query.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_stream_create(metrale_context_t* ctx,
                                                   metrale_stream_t** out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->stream_create();
  });
}

METRALE_API metrale_status_t metrale_stream_destroy(metrale_context_t* ctx,
                                                    metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->stream_destroy(stream); });
}

METRALE_API metrale_status_t metrale_stream_synchronize(metrale_context_t* ctx,
                                                        metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->stream_synchronize(stream); });
}

METRALE_API metrale_stream_t* metrale_default_stream(metrale_context_t* ctx) {
  metrale_stream_t* s = nullptr;
  guarded([&] { s = live(ctx)->default_stream(); });
  return s;
}

METRALE_API int metrale_stream_is_capturing(metrale_context_t* ctx, metrale_stream_t* stream) {
  int capturing = 1;  // a failed query counts as capturing
  guarded([&] { capturing = live(ctx)->stream_is_capturing(stream) ? 1 : 0; });
  return capturing;
}

METRALE_API metrale_status_t metrale_stream_wrap(metrale_context_t* ctx, void* native,
                                                 metrale_stream_t** out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->stream_wrap(reinterpret_cast<uint64_t>(native));
  });
}
