// Allocation, arenas and pinned host memory.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;
using metrale::api::require_nonzero;

METRALE_API metrale_status_t metrale_alloc_at(metrale_context_t* ctx, size_t bytes,
                                              const char* file, int line, metrale_devptr_t* out) {
  return guarded([&] {
    live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = ctx->alloc(bytes, file, line, METRALE_ALLOC_DEVICE);
  });
}

METRALE_API metrale_status_t metrale_alloc_managed_at(metrale_context_t* ctx, size_t bytes,
                                                      const char* file, int line,
                                                      metrale_devptr_t* out) {
  return guarded([&] {
    live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = ctx->alloc(bytes, file, line, METRALE_ALLOC_MANAGED);
  });
}

METRALE_API metrale_status_t metrale_free(metrale_context_t* ctx, metrale_devptr_t dptr) {
  return guarded([&] { live(ctx)->free(dptr); });
}

METRALE_API metrale_status_t metrale_alloc_arena(metrale_context_t* ctx, size_t bytes,
                                                 metrale_devptr_t* out) {
  return guarded([&] {
    live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = ctx->alloc_arena(bytes);
  });
}

METRALE_API metrale_status_t metrale_free_arena(metrale_context_t* ctx, metrale_devptr_t dptr) {
  return guarded([&] { live(ctx)->free_arena(dptr); });
}

METRALE_API metrale_status_t metrale_host_alloc_pinned(metrale_context_t* ctx, size_t bytes,
                                                       void** out) {
  return guarded([&] {
    live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = ctx->host_alloc_pinned(bytes);
  });
}

METRALE_API metrale_status_t metrale_host_free_pinned(metrale_context_t* ctx, void* hptr) {
  return guarded([&] { live(ctx)->host_free_pinned(hptr); });
}

METRALE_API metrale_status_t metrale_host_register(metrale_context_t* ctx, void* hptr,
                                                   size_t bytes) {
  return guarded([&] {
    live(ctx);
    require(hptr, "hptr");
    require_nonzero(bytes, "bytes");
    ctx->host_register(hptr, bytes);
  });
}

METRALE_API metrale_status_t metrale_host_unregister(metrale_context_t* ctx, void* hptr) {
  return guarded([&] {
    live(ctx);
    require(hptr, "hptr");
    ctx->host_unregister(hptr);
  });
}

METRALE_API metrale_status_t metrale_host_is_pinned(metrale_context_t* ctx, const void* hptr,
                                                    size_t bytes, int* yes) {
  return guarded([&] {
    live(ctx);
    require(yes, "yes");
    require_nonzero(bytes, "bytes");
    *yes = hptr != nullptr && ctx->host_is_pinned(hptr, bytes) ? 1 : 0;
  });
}

METRALE_API metrale_status_t metrale_host_device_pointer(metrale_context_t* ctx, void* hptr,
                                                         metrale_devptr_t* out) {
  return guarded([&] {
    live(ctx);
    require(hptr, "hptr");
    require(out, "out");
    *out = ctx->host_device_pointer(hptr);
  });
}
