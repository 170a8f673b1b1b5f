// Allocation, arenas and pinned host memory.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;
using metrale::api::require_nonzero;

METRALE_API metrale_status_t metrale_alloc_at(metrale_context_t* ctx, size_t bytes,
                                              const char* file, int line, metrale_devptr_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = c->alloc(bytes, file, line, METRALE_ALLOC_DEVICE);
  });
}

METRALE_API metrale_status_t metrale_alloc_managed_at(metrale_context_t* ctx, size_t bytes,
                                                      const char* file, int line,
                                                      metrale_devptr_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = c->alloc(bytes, file, line, METRALE_ALLOC_MANAGED);
  });
}

METRALE_API metrale_status_t metrale_free_at(metrale_context_t* ctx, metrale_devptr_t dptr,
                                             const char* file, int line) {
  return guarded([&] { live(ctx)->free(dptr, file, line); });
}

#undef metrale_free
METRALE_API metrale_status_t metrale_free(metrale_context_t* ctx, metrale_devptr_t dptr) {
  return guarded([&] { live(ctx)->free(dptr, nullptr, 0); });
}

METRALE_API metrale_status_t metrale_alloc_arena(metrale_context_t* ctx, size_t bytes,
                                                 metrale_devptr_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = c->alloc_arena(bytes);
  });
}

METRALE_API metrale_status_t metrale_free_arena(metrale_context_t* ctx, metrale_devptr_t dptr) {
  return guarded([&] { live(ctx)->free_arena(dptr); });
}

METRALE_API metrale_status_t metrale_host_alloc_pinned(metrale_context_t* ctx, size_t bytes,
                                                       void** out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    require_nonzero(bytes, "bytes");
    *out = c->host_alloc_pinned(bytes);
  });
}

METRALE_API metrale_status_t metrale_host_free_pinned(metrale_context_t* ctx, void* hptr) {
  return guarded([&] { live(ctx)->host_free_pinned(hptr); });
}

METRALE_API metrale_status_t metrale_host_register(metrale_context_t* ctx, void* hptr,
                                                   size_t bytes) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(hptr, "hptr");
    require_nonzero(bytes, "bytes");
    c->host_register(hptr, bytes);
  });
}

METRALE_API metrale_status_t metrale_host_unregister(metrale_context_t* ctx, void* hptr) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(hptr, "hptr");
    c->host_unregister(hptr);
  });
}

METRALE_API metrale_status_t metrale_host_is_pinned(metrale_context_t* ctx, const void* hptr,
                                                    size_t bytes, int* yes) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(yes, "yes");
    require_nonzero(bytes, "bytes");
    *yes = hptr != nullptr && c->host_is_pinned(hptr, bytes) ? 1 : 0;
  });
}

METRALE_API metrale_status_t metrale_host_device_pointer(metrale_context_t* ctx, void* hptr,
                                                         metrale_devptr_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(hptr, "hptr");
    require(out, "out");
    *out = c->host_device_pointer(hptr);
  });
}
