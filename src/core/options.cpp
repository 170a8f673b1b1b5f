#include "core/options.hpp"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <string>

#include "backend/env_number.hpp"
#include "backend/error.hpp"
#include "core/raw_enum.hpp"

namespace metrale::core {
namespace {

[[noreturn]] void malformed(const char* var, const char* value, const char* expected) {
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string(var) + "='" + value + "' is malformed: expected " + expected);
}

const char* env(const char* var) {
  const char* v = std::getenv(var);
  return (v != nullptr && *v != '\0') ? v : nullptr;
}

// Digits only: strtoull would read " -1" or "\t-1" as 2^64-1.
uint64_t env_u64(const char* var, const char* value, uint64_t max) {
  return backend::parse_env_number(var, value, max);
}

int env_bool(const char* var, const char* value) {
  if (std::strcmp(value, "0") == 0) return 0;
  if (std::strcmp(value, "1") == 0) return 1;
  malformed(var, value, "0 or 1");
}

}  // namespace

void default_options(metrale_context_options_t* opts) {
  std::memset(opts, 0, sizeof(*opts));
  opts->struct_size = sizeof(metrale_context_options_t);
  opts->backend = METRALE_BACKEND_AUTO;
  opts->device = 0;
  opts->trace_capacity = kDefaultTraceCapacity;
}

metrale_context_options_t resolve_options(const metrale_context_options_t* given) {
  metrale_context_options_t o;
  default_options(&o);
  if (given != nullptr) {
    if (given->struct_size != sizeof(metrale_context_options_t)) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "opts->struct_size is " + std::to_string(given->struct_size) + ", expected " +
               std::to_string(sizeof(metrale_context_options_t)) +
               " (call metrale_context_options_init first)");
    }
    o = *given;
    const int backend = raw_enum(o.backend);
    if (backend != METRALE_BACKEND_AUTO && backend != METRALE_BACKEND_CUDA &&
        backend != METRALE_BACKEND_HOST) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "opts->backend is " + std::to_string(backend) +
               ", not a metrale_backend_t");
    }
    if (o.device < 0) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "opts->device is " + std::to_string(o.device) + ", a device ordinal is >= 0");
    }
  }

  if (const char* v = env("METRALE_BACKEND")) {
    if (std::strcmp(v, "auto") == 0) o.backend = METRALE_BACKEND_AUTO;
    else if (std::strcmp(v, "cuda") == 0) o.backend = METRALE_BACKEND_CUDA;
    else if (std::strcmp(v, "host") == 0) o.backend = METRALE_BACKEND_HOST;
    else malformed("METRALE_BACKEND", v, "auto, cuda or host");
  }
  if (const char* v = env("METRALE_DEVICE")) {
    o.device = static_cast<int>(env_u64("METRALE_DEVICE", v, std::numeric_limits<int>::max()));
  }
  if (const char* v = env("METRALE_REDZONE")) {
    o.redzone_bytes = static_cast<size_t>(
        env_u64("METRALE_REDZONE", v, std::numeric_limits<size_t>::max()));
  }
  if (const char* v = env("METRALE_REDZONE_MIN_IDX")) {
    o.redzone_min_index =
        env_u64("METRALE_REDZONE_MIN_IDX", v, std::numeric_limits<uint64_t>::max());
  }
  if (const char* v = env("METRALE_CHECKED")) o.checked_pointers = env_bool("METRALE_CHECKED", v);
  if (const char* v = env("METRALE_DEBUG_SYNC")) o.debug_sync = env_bool("METRALE_DEBUG_SYNC", v);
  if (const char* v = env("METRALE_LAUNCH_TRACE")) {
    o.launch_trace = env_bool("METRALE_LAUNCH_TRACE", v);
  }
  if (const char* v = env("METRALE_KERNEL_TIMING")) {
    o.kernel_timing = env_bool("METRALE_KERNEL_TIMING", v);
  }
  return o;
}

}  // namespace metrale::core
