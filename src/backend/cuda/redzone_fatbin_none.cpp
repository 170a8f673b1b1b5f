// Built instead of the generated fatbin source when nvcc was not found: no
// device code, so the red-zone pass uses its fallback.
#include "backend/cuda/embedded_fatbin.hpp"

namespace metrale::backend::cuda_impl {

alignas(16) const unsigned char redzone_fatbin[1] = {0};
const size_t redzone_fatbin_size = 0;

}  // namespace metrale::backend::cuda_impl
