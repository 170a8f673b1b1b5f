// metrale_device_count's answer: the devices of the backend that
// metrale_context_create would pick (METRALE_BACKEND applied as there).
#include <string>

#include "backend/backend.hpp"
#include "backend/error.hpp"
#include "core/options.hpp"

namespace metrale::core {

int device_count(int raw) {
  if (raw != METRALE_BACKEND_AUTO && raw != METRALE_BACKEND_CUDA && raw != METRALE_BACKEND_HOST) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "backend is " + std::to_string(raw) + ", not a metrale_backend_t");
  }
  switch (backend_from_env(static_cast<metrale_backend_t>(raw))) {
    case METRALE_BACKEND_CUDA:
      return backend::cuda_device_count();
    case METRALE_BACKEND_HOST:
      return backend::host_device_count();
    default:
      break;
  }
  try {
    const int n = backend::cuda_device_count();
    if (n > 0) return n;
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_NO_DRIVER && e.status() != METRALE_ERROR_NO_DEVICE) throw;
  }
  return backend::host_device_count();
}

}  // namespace metrale::core
