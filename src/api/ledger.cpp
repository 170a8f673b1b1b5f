// Ledger queries, the site report and the sweep.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_live_bytes(metrale_context_t* ctx, size_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->live_bytes();
  });
}

METRALE_API metrale_status_t metrale_live_count(metrale_context_t* ctx, size_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->live_count();
  });
}

METRALE_API metrale_status_t metrale_chunk_slack_bytes(metrale_context_t* ctx, size_t* out) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(out, "out");
    *out = c->slack_bytes();
  });
}

METRALE_API metrale_status_t metrale_live_allocations(metrale_context_t* ctx,
                                                      metrale_allocation_t* out, size_t cap,
                                                      size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->live_allocations(out, cap, count);
  });
}

METRALE_API metrale_status_t metrale_alloc_report(metrale_context_t* ctx, size_t top_n,
                                                  size_t min_mib, char* buf, size_t buflen,
                                                  size_t* needed) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(needed, "needed");
    if (buflen > 0) require(buf, "buf");
    c->alloc_report(top_n, min_mib, buf, buflen, needed);
  });
}

METRALE_API metrale_status_t metrale_sweep_unreleased(metrale_context_t* ctx, size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    size_t n = c->sweep_unreleased();
    if (count != nullptr) *count = n;
  });
}
