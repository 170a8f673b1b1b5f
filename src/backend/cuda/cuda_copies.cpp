// Copies and memsets, enqueued on the caller's stream and never waited for.
#include <cstring>

#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {

void CudaBackend::copy_h2d_async(DevPtr dst, const void* src, size_t bytes, StreamHandle s) {
  make_current();
  check(api_.memcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, bytes, as_stream(s)),
        "cuMemcpyHtoDAsync_v2");
}

void CudaBackend::copy_d2h_async(void* dst, DevPtr src, size_t bytes, StreamHandle s) {
  make_current();
  check(api_.memcpyDtoHAsync(dst, static_cast<CUdeviceptr>(src), bytes, as_stream(s)),
        "cuMemcpyDtoHAsync_v2");
}

void CudaBackend::copy_d2d_async(DevPtr dst, DevPtr src, size_t bytes, StreamHandle s) {
  make_current();
  check(api_.memcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src),
                             bytes, as_stream(s)),
        "cuMemcpyDtoDAsync_v2");
}

void CudaBackend::copy_2d_async(DevPtr dst, size_t dst_pitch, DevPtr src, size_t src_pitch,
                                size_t width_bytes, size_t height, StreamHandle s) {
  make_current();
  CUDA_MEMCPY2D copy;
  std::memset(&copy, 0, sizeof copy);
  copy.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.srcDevice = static_cast<CUdeviceptr>(src);
  copy.srcPitch = src_pitch;
  copy.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  copy.dstDevice = static_cast<CUdeviceptr>(dst);
  copy.dstPitch = dst_pitch;
  copy.WidthInBytes = width_bytes;
  copy.Height = height;
  check(api_.memcpy2DAsync(&copy, as_stream(s)), "cuMemcpy2DAsync_v2");
}

void CudaBackend::memset_async(DevPtr dst, uint8_t value, size_t bytes, StreamHandle s) {
  make_current();
  check(api_.memsetD8Async(static_cast<CUdeviceptr>(dst), value, bytes, as_stream(s)),
        "cuMemsetD8Async");
}

}  // namespace metrale::backend::cuda_impl
