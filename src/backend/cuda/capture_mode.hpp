// Relaxed stream-capture mode for the calling thread, for the length of a
// scope. Probed on an H200 (driver 580, CUDA 13.0): while this thread has a
// global or thread-local capture open, cuMemAlloc, cuMemFree,
// cuMemHostAlloc, cuMemFreeHost and cuStreamSynchronize of ANOTHER stream
// fail with CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED and invalidate the
// caller's capture, so a failed library call would have broken it (rule 1).
// None of them touches the capturing stream, and in relaxed mode all of
// them succeed with the capture intact; that is what this guard is for
// (PyTorch's pinned allocator does the same). Never use it around work on
// the capturing stream itself: core refuses that before calling.
#pragma once

#include <cuda.h>

#include "backend/cuda/driver_api.hpp"

namespace metrale::backend::cuda_impl {

class RelaxedCaptureMode {
 public:
  explicit RelaxedCaptureMode(const DriverApi& api) : api_(api) {
    ok_ = api_.threadExchangeStreamCaptureMode != nullptr &&
          api_.threadExchangeStreamCaptureMode(&mode_) == CUDA_SUCCESS;
  }
  ~RelaxedCaptureMode() {
    if (ok_) api_.threadExchangeStreamCaptureMode(&mode_);
  }
  RelaxedCaptureMode(const RelaxedCaptureMode&) = delete;
  RelaxedCaptureMode& operator=(const RelaxedCaptureMode&) = delete;

 private:
  const DriverApi& api_;
  CUstreamCaptureMode mode_ = CU_STREAM_CAPTURE_MODE_RELAXED;
  bool ok_ = false;
};

}  // namespace metrale::backend::cuda_impl
