// Reading the launch trace, the kernel audit and kernel timings.
#include "core/context.hpp"

using metrale::fail;

namespace {

void check_cap(size_t cap, size_t count, const char* what) {
  if (cap != 0 && cap < count) {
    fail(METRALE_ERROR_BUFFER_TOO_SMALL,
         "out holds " + std::to_string(cap) + " entries, " + std::to_string(count) + " " + what +
             " are held (the first " + std::to_string(cap) + " were written)");
  }
}

}  // namespace

void metrale_context::launch_trace_enable(bool on) {
  if (on) trace_.clear();
  watch(kWatchTrace, on);
}

void metrale_context::launch_trace_read(metrale_trace_entry_t* out, size_t cap,
                                        size_t* count) const {
  *count = trace_.read(out, cap);
  check_cap(cap, *count, "trace entries");
}

void metrale_context::kernel_audit_read(metrale_kernel_audit_entry_t* out, size_t cap,
                                        size_t* count) const {
  *count = audit_.read(out, cap);
  check_cap(cap, *count, "kernel lookups");
}

// Resolves outside any lock other callers wait on: the launch path never
// blocks behind this wait (it try-locks the resolver and drops instead).
void metrale_context::kernel_timings_read(metrale_kernel_timing_t* out, size_t cap,
                                          size_t* count) {
  if (timer_.pending() != 0) {
    fault_.check();
    device([&] { timer_.resolve_all(*backend_); });
  }
  *count = timer_.read(out, cap);
  check_cap(cap, *count, "kernels");
}
