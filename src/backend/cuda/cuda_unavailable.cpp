// make_cuda_backend for a library built where cuda.h was not found: there is
// nothing to drive the driver with, so every attempt answers NO_DRIVER.
#include "backend/backend.hpp"

namespace metrale::backend {

std::unique_ptr<Backend> make_cuda_backend(int) {
  fail(METRALE_ERROR_NO_DRIVER,
       "libmetrale_gpu was built without the CUDA toolkit headers (cuda.h), so it has no "
       "cuda backend; rebuild it where the CUDA toolkit is installed");
}

int cuda_device_count() {
  fail(METRALE_ERROR_NO_DRIVER,
       "libmetrale_gpu was built without the CUDA toolkit headers (cuda.h), so it has no "
       "cuda backend");
}

}  // namespace metrale::backend
