// Device information and memory figures.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_device_info(metrale_context_t* ctx,
                                                 metrale_device_info_t* info) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(info, "info");
    c->device_info(info);
  });
}

METRALE_API metrale_status_t metrale_total_memory(metrale_context_t* ctx, size_t* bytes) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(bytes, "bytes");
    *bytes = c->total_memory();
  });
}

METRALE_API metrale_status_t metrale_free_memory(metrale_context_t* ctx, size_t* bytes) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(bytes, "bytes");
    *bytes = c->free_memory();
  });
}

METRALE_API metrale_status_t metrale_device_free_memory(metrale_context_t* ctx, size_t* bytes) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(bytes, "bytes");
    *bytes = c->device_free_memory();
  });
}
