// What every shim shares: the export macro, the thread-local message, the
// argument checks and the exception-to-status translation.
#pragma once

#include <new>
#include <string>

#include "backend/error.hpp"
#include "core/context.hpp"
#include "metrale_gpu.h"

#define METRALE_API extern "C" __attribute__((visibility("default")))

namespace metrale::api {

void set_last_error(const char* message);

// Throws INVALID_ARGUMENT "<name> is NULL".
inline void require(const void* p, const char* name) {
  if (p == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

[[noreturn, gnu::cold, gnu::noinline]] inline void refuse_context(const metrale_context_t* ctx) {
  if (ctx == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "ctx is NULL");
  fail(METRALE_ERROR_INVALID_ARGUMENT, core::not_a_live_context(core::handle_id::value_of(ctx)));
}

// The context object behind a caller's ctx value. The value is a handle,
// not an address: use what this returns, never the caller's pointer. NULL,
// a destroyed context (whatever was created since), a context of the parent
// process after fork() or any other value is INVALID_ARGUMENT.
inline metrale_context* live(const metrale_context_t* ctx) {
  metrale_context* c = core::find_context(core::handle_id::value_of(ctx));
  if (c == nullptr) refuse_context(ctx);
  return c;
}

// metrale_context_destroy: takes ctx out of the registry (of two racing
// destroys, one gets it); then no call finds it any more.
inline metrale_context* claim(metrale_context_t* ctx) {
  metrale_context* c = core::take_context(core::handle_id::value_of(ctx));
  if (c == nullptr) refuse_context(ctx);
  return c;
}

inline void require_nonzero(size_t n, const char* name) {
  if (n == 0) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(name) + " is 0");
}

// Runs body; any exception becomes a status and this thread's message.
template <class F>
metrale_status_t guarded(F&& body) noexcept {
  try {
    body();
    return METRALE_OK;
  } catch (const Error& e) {
    set_last_error(e.what());
    return e.status();
  } catch (const std::bad_alloc&) {
    set_last_error("out of host memory");
    return METRALE_ERROR_OUT_OF_MEMORY;
  } catch (const std::exception& e) {
    set_last_error((std::string("internal error: ") + e.what()).c_str());
    return METRALE_ERROR_INTERNAL;
  } catch (...) {
    set_last_error("internal error: an unknown exception");
    return METRALE_ERROR_INTERNAL;
  }
}

}  // namespace metrale::api
