// Allocation tags (process-wide, per thread) and the ledger by tag.
#include "api/guard.hpp"
#include "core/tags.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_tag_push(const char* tag) {
  return guarded([&] { metrale::core::tags::push(tag); });
}

METRALE_API metrale_status_t metrale_tag_pop(void) {
  return guarded([&] { metrale::core::tags::pop(); });
}

METRALE_API const char* metrale_tag_current(void) {
  return metrale::core::tags::name(metrale::core::tags::current());
}

METRALE_API metrale_status_t metrale_alloc_report_by_tag(metrale_context_t* ctx, size_t top_n,
                                                         size_t min_mib, char* buf,
                                                         size_t buflen, size_t* needed) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(needed, "needed");
    if (buflen > 0) require(buf, "buf");
    c->alloc_report_by_tag(top_n, min_mib, buf, buflen, needed);
  });
}

METRALE_API metrale_status_t metrale_allocation_tag(metrale_context_t* ctx,
                                                    metrale_devptr_t dptr, const char** tag) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(tag, "tag");
    *tag = c->allocation_tag(dptr);
  });
}
