// The red-zone kernels (redzone_kernels.cu) as a fatbin embedded in the
// library. Without nvcc at build time the size is 0 and the red-zone pass
// falls back to memsets and host-side counting (cuda_redzone.cpp).
#pragma once

#include <cstddef>

namespace metrale::backend::cuda_impl {

extern const unsigned char redzone_fatbin[];
extern const size_t redzone_fatbin_size;

}  // namespace metrale::backend::cuda_impl
