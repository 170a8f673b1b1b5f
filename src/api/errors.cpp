// Status names, the thread-local message, the version and logging setup.
#include <pthread.h>

#include <cstddef>
#include <cstdlib>
#include <cstring>

#include "api/guard.hpp"
#include "core/log.hpp"
#include "core/raw_enum.hpp"

namespace metrale::api {
namespace {

// The message lives in a malloc'ed block held by a pthread key, not in a
// thread_local std::string: a thread's last calls may come from a pthread
// key destructor (a per-thread cache releasing its memory at thread exit),
// which runs after the thread's C++ thread_local objects were destroyed, and
// a failure there wrote into (and freed again) the destroyed string. The
// key's destructor is libc's free: a block set by such a late call is freed
// in a later round of the destructors, and no code of this library is
// called at thread exit (it may have been unloaded).
struct MessageBlock {
  size_t capacity;  // bytes of text, NUL included
  char text[1];
};

// Only when no key could be made (the process holds PTHREAD_KEYS_MAX):
// whether this thread had a failure, told without its text. One byte of
// TLS: the library's TLS is static (its initial-exec variables), and a
// dlopen (Python's ctypes) finds only a small surplus of static TLS.
thread_local bool t_failed_unkept = false;
constexpr const char* kUnkept =
    "(the message was not kept: no thread-specific key was left in this process)";

bool message_key(pthread_key_t* out) noexcept {
  static pthread_key_t key;
  static const bool made = pthread_key_create(&key, std::free) == 0;
  *out = key;
  return made;
}

}  // namespace

void set_last_error(const char* message) {
  const size_t n = std::strlen(message);
  pthread_key_t key;
  if (!message_key(&key)) {
    t_failed_unkept = true;
    return;
  }
  auto* block = static_cast<MessageBlock*>(pthread_getspecific(key));
  if (block == nullptr || block->capacity < n + 1) {
    const size_t capacity = n + 1 < 128 ? 128 : n + 1;
    auto* grown = static_cast<MessageBlock*>(
        std::realloc(block, offsetof(MessageBlock, text) + capacity));
    if (grown == nullptr) {
      if (block != nullptr) block->text[0] = '\0';  // no memory for the message: "" beats a crash
      return;
    }
    if (pthread_setspecific(key, grown) != 0) {
      std::free(grown);
      (void)pthread_setspecific(key, nullptr);  // the old block is gone with the realloc
      return;
    }
    grown->capacity = capacity;
    block = grown;
  }
  std::memcpy(block->text, message, n + 1);
}

const char* last_error() noexcept {
  pthread_key_t key;
  if (!message_key(&key)) return t_failed_unkept ? kUnkept : "";
  const auto* block = static_cast<const MessageBlock*>(pthread_getspecific(key));
  return block != nullptr ? block->text : "";
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
  return metrale::api::last_error();
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
