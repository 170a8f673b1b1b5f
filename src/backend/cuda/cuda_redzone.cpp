// The red-zone pass: fill or count many small device ranges in one kernel
// launch each, on an internal stream with scratch buffers of our own (never
// on any ledger). Without the kernels (built without nvcc, or the embedded
// module refused) it falls back to one memset per range and to counting
// copies on the host, and says so once in the log.
#include "backend/log_sink.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <mutex>
#include <string>

#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/embedded_fatbin.hpp"
#include "backend/cuda/redzone_layout.hpp"
#include "backend/cuda/redzone_log.hpp"

namespace metrale::backend::cuda_impl {
namespace {


}  // namespace

void CudaBackend::redzone_prepare() {
  if (redzone_stream_ == nullptr)
    check(api_.streamCreate(&redzone_stream_, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  if (redzone_module_tried_) return;
  if (redzone_fatbin_size == 0) {
    redzone_module_tried_ = true;
    log_fallback_once("libmetrale_gpu was built without nvcc, so it has no red-zone kernels");
    return;
  }
  CUmodule module = nullptr;
  CUresult rc = api_.moduleLoadData(&module, redzone_fatbin);
  if (is_sticky(rc)) raise(rc, "cuModuleLoadData", "red-zone kernels");
  redzone_module_tried_ = true;
  if (rc != CUDA_SUCCESS) {
    log_fallback_once("loading the embedded red-zone kernels failed: " +
                      failure_message(&api_, "cuModuleLoadData", rc));
    return;
  }
  CUfunction fill = nullptr, count = nullptr;
  rc = api_.moduleGetFunction(&fill, module, "metrale_redzone_fill");
  if (rc == CUDA_SUCCESS) rc = api_.moduleGetFunction(&count, module, "metrale_redzone_count");
  if (rc != CUDA_SUCCESS) {
    api_.moduleUnload(module);
    log_fallback_once("the embedded red-zone module lacks its kernels: " +
                      failure_message(&api_, "cuModuleGetFunction", rc));
    return;
  }
  redzone_module_ = module;
  redzone_fill_ = fill;
  redzone_count_ = count;
  // The device-side table's kernels; without them scans count the whole
  // table each time (pattern_count).
  CUfunction patch = nullptr, count_list = nullptr;
  if (api_.moduleGetFunction(&patch, module, "metrale_redzone_patch") == CUDA_SUCCESS &&
      api_.moduleGetFunction(&count_list, module, "metrale_redzone_count_list") == CUDA_SUCCESS) {
    redzone_patch_ = patch;
    redzone_count_list_ = count_list;
  }
  // The stream-ordered check of freed pads (cuda_pad_check.cpp); without it
  // those checks are synchronous (pattern_count).
  CUfunction check_restore = nullptr;
  if (api_.moduleGetFunction(&check_restore, module, "metrale_redzone_check_restore") ==
      CUDA_SUCCESS)
    redzone_check_restore_ = check_restore;
}

void CudaBackend::redzone_reserve(size_t n) {
  const size_t need = n * (sizeof(DeviceRange) + sizeof(uint32_t));
  if (need > redzone_staging_bytes_) {
    const size_t bytes = std::max<size_t>({need, 2 * redzone_staging_bytes_, 4096});
    if (redzone_staging_ != nullptr) api_.memFreeHost(redzone_staging_);
    redzone_staging_ = nullptr;
    redzone_staging_bytes_ = 0;
    void* staging = nullptr;
    check(api_.memHostAlloc(&staging, bytes, 0), "cuMemHostAlloc",
          "staging for the red-zone pass");
    redzone_staging_ = static_cast<unsigned char*>(staging);
    redzone_staging_bytes_ = bytes;
  }
  if (need <= redzone_scratch_bytes_) return;
  if (redzone_scratch_ != 0) {
    api_.memFree(redzone_scratch_);
    redzone_scratch_ = 0;
    redzone_scratch_bytes_ = 0;
  }
  const size_t bytes = std::max<size_t>({need, 2 * redzone_scratch_bytes_, 4096});
  check(api_.memAlloc(&redzone_scratch_, bytes), "cuMemAlloc_v2",
        "scratch for the red-zone pass");
  redzone_scratch_bytes_ = bytes;
}

void CudaBackend::redzone_upload(const Range* ranges, size_t n) {
  auto* staged = reinterpret_cast<DeviceRange*>(redzone_staging_);
  for (size_t i = 0; i < n; ++i) staged[i] = DeviceRange{ranges[i].ptr, ranges[i].bytes};
  check(api_.memcpyHtoDAsync(redzone_scratch_, staged, n * sizeof(DeviceRange), redzone_stream_),
        "cuMemcpyHtoDAsync_v2");
}

void CudaBackend::pattern_fill(const Range* ranges, size_t n, uint8_t byte) {
  if (n == 0) return;
  make_current();
  // Its own stream and waits: allowed beside a capture on this thread.
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  LogAfterUnlock log_after_unlock;
  std::lock_guard<std::mutex> lock(redzone_mutex_);
  redzone_prepare();
  // A few ranges (an allocation's own pad) are cheaper as memsets than as an
  // upload plus a launch.
  constexpr size_t kMemsetUpTo = 4;
  if (redzone_fill_ != nullptr && n > kMemsetUpTo) {
    redzone_reserve(n);
    redzone_upload(ranges, n);
    CUdeviceptr device_ranges = redzone_scratch_;
    unsigned long long count = n;
    unsigned int value = byte;
    void* params[] = {&device_ranges, &count, &value};
    const auto blocks = static_cast<unsigned int>(std::min(n, kMaxBlocks));
    check(api_.launchKernel(redzone_fill_, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0,
                            redzone_stream_, params, nullptr),
          "cuLaunchKernel", "metrale_redzone_fill");
  } else {
    for (size_t i = 0; i < n; ++i)
      check(api_.memsetD8Async(ranges[i].ptr, byte, ranges[i].bytes, redzone_stream_),
            "cuMemsetD8Async", "red-zone fill");
  }
  check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone fill");
}

void CudaBackend::pattern_count(const Range* ranges, size_t n, uint8_t byte,
                                uint32_t* mismatches) {
  if (n == 0) return;
  make_current();
  // Its own stream and waits: allowed beside a capture on this thread.
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  LogAfterUnlock log_after_unlock;
  std::lock_guard<std::mutex> lock(redzone_mutex_);
  redzone_prepare();
  // Core has waited for the context's streams (not the whole device context:
  // that would break a capture on another thread).
  if (redzone_count_ != nullptr) {
    redzone_reserve(n);
    redzone_upload(ranges, n);
    CUdeviceptr device_ranges = redzone_scratch_;
    CUdeviceptr device_counts = redzone_scratch_ + n * sizeof(DeviceRange);
    unsigned long long count = n;
    unsigned int value = byte;
    void* params[] = {&device_ranges, &count, &value, &device_counts};
    const auto blocks = static_cast<unsigned int>(std::min(n, kMaxBlocks));
    check(api_.launchKernel(redzone_count_, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0,
                            redzone_stream_, params, nullptr),
          "cuLaunchKernel", "metrale_redzone_count");
    unsigned char* host_counts = redzone_staging_ + n * sizeof(DeviceRange);
    check(api_.memcpyDtoHAsync(host_counts, device_counts, n * sizeof(uint32_t),
                               redzone_stream_),
          "cuMemcpyDtoHAsync_v2", "red-zone counts");
    check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone scan");
    std::memcpy(mismatches, host_counts, n * sizeof(uint32_t));
    return;
  }
  size_t total = 0;
  for (size_t i = 0; i < n; ++i) total += ranges[i].bytes;
  if (redzone_host_.size() < total) redzone_host_.resize(total);
  size_t at = 0;
  for (size_t i = 0; i < n; ++i) {
    check(api_.memcpyDtoHAsync(redzone_host_.data() + at, ranges[i].ptr, ranges[i].bytes,
                               redzone_stream_),
          "cuMemcpyDtoHAsync_v2", "red-zone scan");
    at += ranges[i].bytes;
  }
  check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone scan");
  at = 0;
  for (size_t i = 0; i < n; ++i) {
    size_t bad = 0;
    for (size_t j = 0; j < ranges[i].bytes; ++j) bad += redzone_host_[at + j] != byte;
    mismatches[i] = bad > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(bad);
    at += ranges[i].bytes;
  }
}

void CudaBackend::pattern_count_table(const Range* table, size_t n, const uint32_t* changed,
                                      size_t nchanged, bool whole, uint8_t byte,
                                      std::vector<PadHit>* hits) {
  if (n == 0) return;
  make_current();
  // Its own stream and waits: allowed beside a capture on this thread.
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  {
    LogAfterUnlock log_after_unlock;
    std::lock_guard<std::mutex> lock(redzone_mutex_);
    redzone_prepare();
    if (redzone_count_list_ != nullptr) {
      // Invalid until this call returns: a throw below leaves the device
      // table in an unknown state, and the next call uploads it whole.
      const bool was_valid = table_valid_;
      table_valid_ = false;
      // A call that threw may have left copies from the staging buffer or
      // into the table pending: let them finish before either is reused.
      if (!was_valid)
        check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone scan");
      const bool fresh = table_reserve(n);  // a new table has nothing in it
      table_update(table, n, changed, nchanged, whole || !was_valid || fresh);
      table_count(n, byte, hits);
      table_valid_ = true;
      return;
    }
  }
  // No kernels: count the whole table through pattern_count (which takes
  // the red-zone lock itself).
  count_all(table, n, byte, hits);
}

void CudaBackend::redzone_release() noexcept {
  std::lock_guard<std::mutex> lock(redzone_mutex_);
  table_release();
  pad_slots_release();
  if (redzone_module_ != nullptr) api_.moduleUnload(redzone_module_);
  if (redzone_scratch_ != 0) api_.memFree(redzone_scratch_);
  if (redzone_staging_ != nullptr) api_.memFreeHost(redzone_staging_);
  if (redzone_stream_ != nullptr) api_.streamDestroy(redzone_stream_);
  redzone_module_ = nullptr;
  redzone_fill_ = redzone_count_ = nullptr;
  redzone_check_restore_ = nullptr;
  redzone_scratch_ = 0;
  redzone_scratch_bytes_ = 0;
  redzone_staging_ = nullptr;
  redzone_staging_bytes_ = 0;
  redzone_stream_ = nullptr;
}

}  // namespace metrale::backend::cuda_impl
