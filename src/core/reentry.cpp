// Calls that a host kernel, or a log callback, may not make on the context
// whose work is running under it (header, rule 5). On the host backend a
// kernel is an op of its stream, run in the launching thread: a call from
// it that waits for that stream would wait for the kernel itself, and
// destroying the context would free memory the launch still uses. Each is
// refused with INVALID_ARGUMENT before anything is done, so the call has no
// effect and the kernel can go on. The cuda backend runs no caller code on
// its streams, so only the log-callback rule applies there.
#include "core/context.hpp"
#include "core/log.hpp"

using metrale::fail;

void metrale_context::refuse_wait_in_own_work(StreamHandle h, const char* what) {
  if (!backend_->in_stream_work(h)) return;
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string(what) +
           " called from a host kernel running on the stream it would wait for: it would "
           "wait for the kernel itself");
}

void metrale_context::refuse_in_any_work(const char* what) {
  if (!backend_->in_stream_work(0)) return;
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string(what) +
           " called from a host kernel running on a stream of this context: it waits for "
           "every stream of the context, the kernel's own included");
}

void metrale_context::refuse_destroy_from_inside() {
  if (metrale::core::in_log_callback()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "metrale_context_destroy called from inside the log callback: the line may come from "
         "a call on this context that is still running; destroy it after the callback returns");
  }
  if (backend_->in_stream_work(0)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "metrale_context_destroy called from a host kernel running on a stream of this "
         "context: the launch still uses the context; destroy it after the launch returns");
  }
}

void metrale_context::refuse_stream_destroy_in_own_work(StreamHandle h) {
  if (!backend_->in_stream_work(h)) return;
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       "metrale_stream_destroy called from a host kernel running on that stream: the launch "
       "still uses it; destroy it after the launch returns");
}
