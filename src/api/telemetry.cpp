// Counters, the launch trace, the kernel audit and kernel timings.
#include <cstddef>
#include <cstring>

#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_counters(metrale_context_t* ctx, metrale_counters_t* c) {
  return guarded([&] {
    metrale_context* context = live(ctx);
    require(c, "c");
    // The layout before timings_dropped was added is still served.
    constexpr size_t kOldSize = offsetof(metrale_counters_t, timings_dropped);
    const size_t size = c->struct_size;
    if (size != sizeof(metrale_counters_t) && size != kOldSize) {
      metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                    "c->struct_size is " + std::to_string(size) + ", expected " +
                        std::to_string(sizeof(metrale_counters_t)) + " (or " +
                        std::to_string(kOldSize) + ", the layout before timings_dropped)");
    }
    metrale_counters_t all{};
    context->counters(&all);
    all.struct_size = size;
    std::memcpy(c, &all, size);
  });
}

METRALE_API metrale_status_t metrale_counters_reset(metrale_context_t* ctx) {
  return guarded([&] { live(ctx)->counters_reset(); });
}

METRALE_API metrale_status_t metrale_launch_trace_enable(metrale_context_t* ctx, int on) {
  return guarded([&] { live(ctx)->launch_trace_enable(on != 0); });
}

METRALE_API metrale_status_t metrale_launch_trace_read(metrale_context_t* ctx,
                                                       metrale_trace_entry_t* out, size_t cap,
                                                       size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->launch_trace_read(out, cap, count);
  });
}

METRALE_API metrale_status_t metrale_kernel_audit_read(metrale_context_t* ctx,
                                                       metrale_kernel_audit_entry_t* out,
                                                       size_t cap, size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->kernel_audit_read(out, cap, count);
  });
}

METRALE_API metrale_status_t metrale_kernel_timing_enable(metrale_context_t* ctx, int on) {
  return guarded([&] { live(ctx)->kernel_timing_enable(on != 0); });
}

METRALE_API metrale_status_t metrale_kernel_timings_read(metrale_context_t* ctx,
                                                         metrale_kernel_timing_t* out, size_t cap,
                                                         size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    if (cap > 0) require(out, "out");
    c->kernel_timings_read(out, cap, count);
  });
}
