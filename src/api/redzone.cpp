// Red-zone scan and poison.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_redzone_scan(metrale_context_t* ctx,
                                                  metrale_redzone_violation_t* out, size_t cap,
                                                  size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->redzone_scan(out, cap, count);
  });
}

METRALE_API metrale_status_t metrale_redzone_poison(metrale_context_t* ctx, uint64_t lo,
                                                    uint64_t hi) {
  return guarded([&] { live(ctx)->redzone_poison(lo, hi); });
}

METRALE_API metrale_status_t metrale_quarantine_scan(metrale_context_t* ctx,
                                                     metrale_use_after_free_t* out, size_t cap,
                                                     size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->quarantine_scan(out, cap, count);
  });
}
