// Status names, the thread-local message, the version and logging setup.
#include "api/guard.hpp"
#include "core/log.hpp"
#include "core/raw_enum.hpp"

namespace metrale::api {
namespace {
thread_local std::string t_message;
}  // namespace

void set_last_error(const char* message) {
  try {
    t_message = message;
  } catch (...) {
    t_message.clear();  // no memory even for the message: "" beats a crash
  }
}

}  // namespace metrale::api

using metrale::api::guarded;

METRALE_API const char* metrale_status_name(metrale_status_t status) {
  switch (metrale::core::raw_enum(status)) {
    case METRALE_OK: return "METRALE_OK";
    case METRALE_ERROR_INVALID_ARGUMENT: return "METRALE_ERROR_INVALID_ARGUMENT";
    case METRALE_ERROR_OUT_OF_MEMORY: return "METRALE_ERROR_OUT_OF_MEMORY";
    case METRALE_ERROR_NOT_FOUND: return "METRALE_ERROR_NOT_FOUND";
    case METRALE_ERROR_NO_DRIVER: return "METRALE_ERROR_NO_DRIVER";
    case METRALE_ERROR_NO_DEVICE: return "METRALE_ERROR_NO_DEVICE";
    case METRALE_ERROR_UNSUPPORTED: return "METRALE_ERROR_UNSUPPORTED";
    case METRALE_ERROR_CONTEXT_LOST: return "METRALE_ERROR_CONTEXT_LOST";
    case METRALE_ERROR_REDZONE_CORRUPTED: return "METRALE_ERROR_REDZONE_CORRUPTED";
    case METRALE_ERROR_OUT_OF_BOUNDS: return "METRALE_ERROR_OUT_OF_BOUNDS";
    case METRALE_ERROR_CAPTURE: return "METRALE_ERROR_CAPTURE";
    case METRALE_ERROR_BUFFER_TOO_SMALL: return "METRALE_ERROR_BUFFER_TOO_SMALL";
    case METRALE_ERROR_DRIVER: return "METRALE_ERROR_DRIVER";
    case METRALE_ERROR_INTERNAL: return "METRALE_ERROR_INTERNAL";
  }
  return "METRALE_UNKNOWN_STATUS";
}

METRALE_API const char* metrale_backend_name(metrale_backend_t backend) {
  switch (metrale::core::raw_enum(backend)) {
    case METRALE_BACKEND_AUTO: return "METRALE_BACKEND_AUTO";
    case METRALE_BACKEND_CUDA: return "METRALE_BACKEND_CUDA";
    case METRALE_BACKEND_HOST: return "METRALE_BACKEND_HOST";
  }
  return "METRALE_UNKNOWN_BACKEND";
}

METRALE_API const char* metrale_last_error_message(void) {
  return metrale::api::t_message.c_str();
}

METRALE_API metrale_status_t metrale_version(int* major, int* minor, int* patch) {
  if (major != nullptr) *major = METRALE_VERSION_MAJOR;
  if (minor != nullptr) *minor = METRALE_VERSION_MINOR;
  if (patch != nullptr) *patch = METRALE_VERSION_PATCH;
  return METRALE_OK;
}

METRALE_API metrale_status_t metrale_log_set_level(metrale_log_level_t level) {
  return guarded([&] {
    const int raw = metrale::core::raw_enum(level);
    if (raw < METRALE_LOG_TRACE || raw > METRALE_LOG_OFF) {
      metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                    "level is " + std::to_string(raw) +
                        ", not a metrale_log_level_t (0..6)");
    }
    metrale::core::set_log_level(level);
  });
}

METRALE_API metrale_status_t metrale_log_set_callback(metrale_log_fn fn, void* user) {
  return guarded([&] { metrale::core::set_log_callback(fn, user); });
}
