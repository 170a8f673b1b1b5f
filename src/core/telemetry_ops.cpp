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
  trace_on_.store(on);
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

void metrale_context::kernel_timings_read(metrale_kernel_timing_t* out, size_t cap,
                                          size_t* count) {
  {
    std::lock_guard<std::mutex> lock(timing_mutex_);
    if (!pending_spans_.empty()) {
      fault_.check();
      size_t done = 0;
      try {
        for (const auto& span : pending_spans_) {
          float ms = device([&] {
            backend_->event_synchronize(span.end);
            return backend_->event_elapsed_ms(span.start, span.end);
          });
          timings_.add_ms(span.row, ms);
          free_timing_events_.push_back(span.start);
          free_timing_events_.push_back(span.end);
          ++done;
        }
      } catch (...) {
        pending_spans_.erase(pending_spans_.begin(), pending_spans_.begin() + done);
        throw;
      }
      pending_spans_.clear();
    }
  }
  *count = timings_.read(out, cap);
  check_cap(cap, *count, "kernels");
}
