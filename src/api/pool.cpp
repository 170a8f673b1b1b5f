// The caching pool's calls: stream-ordered alloc and free, record_stream,
// stats and trim.
#include <cstddef>
#include <cstring>

#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;
using metrale::api::require_nonzero;

METRALE_API metrale_status_t metrale_alloc_async_at(metrale_context_t* ctx, size_t bytes,
                                                    metrale_stream_t* s, const char* file,
                                                    int line, metrale_devptr_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    // Stream-ordered: the pad fill (red zones) stays on s, unwaited.
    *out = c->alloc(bytes, file, line, METRALE_ALLOC_DEVICE, s, /*wait_for_fill=*/false);
  });
}

METRALE_API metrale_status_t metrale_free_async_at(metrale_context_t* ctx, metrale_devptr_t dptr,
                                                   metrale_stream_t* s, const char* file,
                                                   int line) {
  return guarded([&] { live(ctx)->free_on(dptr, s, file, line); });
}

#undef metrale_free_async
METRALE_API metrale_status_t metrale_free_async(metrale_context_t* ctx, metrale_devptr_t dptr,
                                                metrale_stream_t* s) {
  return guarded([&] { live(ctx)->free_on(dptr, s, nullptr, 0); });
}

METRALE_API metrale_status_t metrale_record_stream(metrale_context_t* ctx,
                                                   metrale_devptr_t dptr, metrale_stream_t* s) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require_nonzero(dptr, "dptr");
    c->record_stream(dptr, s);
  });
}

METRALE_API metrale_status_t metrale_pool_stats(metrale_context_t* ctx, metrale_pool_stats_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    if (out->struct_size != sizeof(metrale_pool_stats_t) &&
        out->struct_size != offsetof(metrale_pool_stats_t, pads_unlisted) &&
        out->struct_size != offsetof(metrale_pool_stats_t, pad_fills)) {
      metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                    "out->struct_size is " + std::to_string(out->struct_size) + ", expected " +
                        std::to_string(sizeof(metrale_pool_stats_t)) + " (or " +
                        std::to_string(offsetof(metrale_pool_stats_t, pads_unlisted)) +
                        ", the layout before pads_unlisted, or " +
                        std::to_string(offsetof(metrale_pool_stats_t, pad_fills)) +
                        ", the layout before pad_fills)");
    }
    c->pool_stats(out);
  });
}

METRALE_API metrale_status_t metrale_pool_trim(metrale_context_t* ctx, size_t keep_bytes,
                                               size_t* released) {
  return guarded([&] {
    const size_t r = live(ctx)->pool_trim(keep_bytes);
    if (released != nullptr) *released = r;
  });
}
