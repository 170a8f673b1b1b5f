// The allocation event log (core/event_log.hpp, docs/event-log.md).
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_event_log_open(metrale_context_t* ctx, const char* path) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(path, "path");
    c->event_log_open(path, metrale::core::handle_id::value_of(ctx));
  });
}

METRALE_API metrale_status_t metrale_event_log_close(metrale_context_t* ctx) {
  return guarded([&] { live(ctx)->event_log_close(); });
}

METRALE_API metrale_status_t metrale_event_log_flush(metrale_context_t* ctx) {
  return guarded([&] { live(ctx)->event_log_flush(); });
}
