#include "core/options.hpp"

#include <cstddef>
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
  opts->pool = 1;
  opts->quarantine_bytes = 0;
  opts->staging_threshold = METRALE_STAGING_DEFAULT_THRESHOLD;
  opts->staging_buffer_bytes = METRALE_STAGING_DEFAULT_BUFFER_BYTES;
  opts->staging_buffers = METRALE_STAGING_DEFAULT_BUFFERS;
  opts->staging_threads = METRALE_STAGING_DEFAULT_THREADS;
  opts->pinned_pool = 1;
}

size_t options_v1_size() { return offsetof(metrale_context_options_t, pool); }

void default_options_sized(metrale_context_options_t* opts, size_t struct_size) {
  if (struct_size != sizeof(metrale_context_options_t) && struct_size != options_v1_size()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "struct_size is " + std::to_string(struct_size) + ", expected " +
             std::to_string(sizeof(metrale_context_options_t)) + " or " +
             std::to_string(options_v1_size()) + " (the 0.1 layout)");
  }
  metrale_context_options_t full;
  default_options(&full);
  full.struct_size = struct_size;
  std::memcpy(opts, &full, struct_size);
}

namespace {

// Fields a caller sets; checked after the env variables were applied, so a
// bad value names where it came from.
void check_staging(const metrale_context_options_t& o) {
  if (o.staging_buffers < 2) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "staging_buffers (opts or METRALE_STAGING_BUFFERS) is " +
             std::to_string(o.staging_buffers) + ": a ring needs at least 2 buffers");
  }
  if (o.staging_threads < 1 || o.staging_threads > 64) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "staging_threads (opts or METRALE_STAGING_THREADS) is " +
             std::to_string(o.staging_threads) + ": expected 1 to 64");
  }
  if (o.staging_buffers > 1024) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "staging_buffers is " + std::to_string(o.staging_buffers) + ": expected at most 1024");
  }
  if (o.staging_buffer_bytes > (size_t{1} << 32) ||
      o.staging_buffer_bytes * o.staging_buffers > (size_t{4} << 30)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "staging_buffer_bytes x staging_buffers is " + std::to_string(o.staging_buffer_bytes) +
             " x " + std::to_string(o.staging_buffers) +
             ": the ring may pin at most 4 GiB (and one buffer at most 4 GiB)");
  }
  if (o.staging_buffer_bytes < 4096) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "staging_buffer_bytes (opts or METRALE_STAGING_BUFFER) is " +
             std::to_string(o.staging_buffer_bytes) + ": expected at least 4096");
  }
  if (o.pool != 0 && o.pool != 1) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "opts->pool is " + std::to_string(o.pool) + ", expected 0 or 1");
  }
  if (o.pinned_pool != 0 && o.pinned_pool != 1) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "opts->pinned_pool is " + std::to_string(o.pinned_pool) + ", expected 0 or 1");
  }
}

}  // namespace

metrale_backend_t backend_from_env(metrale_backend_t b) {
  const char* v = env("METRALE_BACKEND");
  if (v == nullptr) return b;
  if (std::strcmp(v, "auto") == 0) return METRALE_BACKEND_AUTO;
  if (std::strcmp(v, "cuda") == 0) return METRALE_BACKEND_CUDA;
  if (std::strcmp(v, "host") == 0) return METRALE_BACKEND_HOST;
  malformed("METRALE_BACKEND", v, "auto, cuda or host");
}

metrale_context_options_t resolve_options(const metrale_context_options_t* given) {
  metrale_context_options_t o;
  default_options(&o);
  if (given != nullptr) {
    if (given->struct_size != sizeof(metrale_context_options_t) &&
        given->struct_size != options_v1_size()) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "opts->struct_size is " + std::to_string(given->struct_size) + ", expected " +
               std::to_string(sizeof(metrale_context_options_t)) + " (or " +
               std::to_string(options_v1_size()) +
               ", the 0.1 layout; call metrale_context_options_init first)");
    }
    // An older caller's struct ends early: read only what it has, the rest
    // keeps its default.
    std::memcpy(&o, given, given->struct_size);
    o.struct_size = sizeof(o);
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
    if (o.trace_capacity > METRALE_TRACE_CAPACITY_MAX) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "opts->trace_capacity is " + std::to_string(o.trace_capacity) +
               ", more than METRALE_TRACE_CAPACITY_MAX (" +
               std::to_string(METRALE_TRACE_CAPACITY_MAX) + " entries)");
    }
  }

  o.backend = backend_from_env(o.backend);
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
  if (const char* v = env("METRALE_POOL")) o.pool = env_bool("METRALE_POOL", v);
  if (const char* v = env("METRALE_PINNED_POOL")) {
    o.pinned_pool = env_bool("METRALE_PINNED_POOL", v);
  }
  if (const char* v = env("METRALE_QUARANTINE")) {
    o.quarantine_bytes = static_cast<size_t>(
        env_u64("METRALE_QUARANTINE", v, std::numeric_limits<size_t>::max()));
  }
  if (const char* v = env("METRALE_STAGING_THRESHOLD")) {
    o.staging_threshold = static_cast<size_t>(
        env_u64("METRALE_STAGING_THRESHOLD", v, std::numeric_limits<size_t>::max()));
  }
  if (const char* v = env("METRALE_STAGING_BUFFER")) {
    o.staging_buffer_bytes =
        static_cast<size_t>(env_u64("METRALE_STAGING_BUFFER", v, size_t{1} << 32));
  }
  if (const char* v = env("METRALE_STAGING_BUFFERS")) {
    o.staging_buffers = static_cast<uint32_t>(env_u64("METRALE_STAGING_BUFFERS", v, 1024));
  }
  if (const char* v = env("METRALE_STAGING_THREADS")) {
    o.staging_threads = static_cast<uint32_t>(env_u64("METRALE_STAGING_THREADS", v, 64));
  }
  check_staging(o);
  return o;
}

}  // namespace metrale::core
