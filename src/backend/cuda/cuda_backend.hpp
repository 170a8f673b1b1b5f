// The CUDA backend: the Backend interface on the driver API, through the
// function table of driver_api.hpp, on the device's primary context (the one
// the CUDA runtime, PyTorch and CuPy share). Its methods live in one file per
// concern: cuda_context.cpp, cuda_memory.cpp, cuda_copies.cpp,
// cuda_streams.cpp, cuda_graphs.cpp, cuda_modules.cpp, cuda_redzone.cpp.
#pragma once

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.hpp"
#include "backend/cuda/cuda_errors.hpp"
#include "backend/cuda/cuda_snapshots.hpp"
#include "backend/cuda/driver_api.hpp"

namespace metrale::backend::cuda_impl {

class CudaBackend final : public Backend {
 public:
  // Takes over one retain of the primary context of `device`.
  CudaBackend(const DriverApi& api, int ordinal, CUdevice device, CUcontext context);
  ~CudaBackend() override;
  CudaBackend(const CudaBackend&) = delete;
  CudaBackend& operator=(const CudaBackend&) = delete;

  metrale_backend_t kind() const override { return METRALE_BACKEND_CUDA; }
  DeviceInfo device_info() override;
  void mem_info(size_t* free_bytes, size_t* total_bytes) override;
  void bind_thread() override;

  DevPtr mem_alloc(size_t bytes, size_t* reserved) override;
  DevPtr mem_alloc_managed(size_t bytes, size_t* reserved) override;
  void mem_free(DevPtr ptr) override;
  void* host_alloc_pinned(size_t bytes) override;
  void host_free_pinned(void* ptr) override;
  void host_register(void* ptr, size_t bytes) override;
  void host_unregister(void* ptr) override;
  DevPtr host_device_pointer(void* ptr) override;
  bool host_range_pinned(const void* ptr, size_t bytes) override;
  bool device_range_known(DevPtr ptr, size_t bytes) override;

  void copy_h2d_async(DevPtr dst, const void* src, size_t bytes, StreamHandle s) override;
  void copy_h2d_snapshot_async(DevPtr dst, const void* src, size_t bytes,
                               StreamHandle s) override;
  void copy_d2h_async(void* dst, DevPtr src, size_t bytes, StreamHandle s) override;
  void copy_d2d_async(DevPtr dst, DevPtr src, size_t bytes, StreamHandle s) override;
  void copy_2d_async(DevPtr dst, size_t dst_pitch, DevPtr src, size_t src_pitch,
                     size_t width_bytes, size_t height, StreamHandle s) override;
  void memset_async(DevPtr dst, uint8_t value, size_t bytes, StreamHandle s) override;

  void pattern_fill(const Range* ranges, size_t n, uint8_t byte) override;
  void pattern_count(const Range* ranges, size_t n, uint8_t byte,
                     uint32_t* mismatches) override;

  StreamHandle stream_create() override;
  void stream_destroy(StreamHandle s) override;
  void stream_synchronize(StreamHandle s) override;
  bool stream_is_capturing(StreamHandle s) override;
  EventHandle event_create(bool timing) override;
  void event_destroy(EventHandle e) override;
  void event_record(EventHandle e, StreamHandle s) override;
  void event_synchronize(EventHandle e) override;
  bool event_query(EventHandle e) override;
  float event_elapsed_ms(EventHandle start, EventHandle end) override;
  void stream_wait_event(StreamHandle s, EventHandle e) override;

  void capture_begin(StreamHandle s) override;
  GraphHandle capture_end(StreamHandle s) override;
  void capture_abort(StreamHandle s) override;
  void graph_launch(GraphHandle g, StreamHandle s) override;
  void graph_destroy(GraphHandle g) override;

  ModuleHandle module_load(const void* image, size_t size) override;
  void module_unload(ModuleHandle m) override;
  FuncHandle module_function(ModuleHandle m, const char* name) override;
  ModuleHandle host_module_add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn,
                               void* user, const size_t* param_sizes,
                               size_t nparams) override;
  bool function_params(FuncHandle f, std::vector<ParamInfo>* out) override;
  void launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes, StreamHandle s,
              void** params) override;
  void launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                     StreamHandle s, const void* args, size_t args_bytes) override;

  std::string probe_fault() override;
  bool may_hide_fault(const Error& e) const override;

 private:
  // Makes the primary context current on the calling thread when it is not.
  // Checked on every call rather than cached per thread: Go moves goroutines
  // between OS threads, and other libraries on the same thread may set their
  // own context in between. cuCtxGetCurrent only reads thread-local state.
  void make_current() {
    CUcontext current = nullptr;
    if (api_.ctxGetCurrent(&current) == CUDA_SUCCESS && current == context_) return;
    set_current();
  }
  void set_current();
  // Throw for a failed call, remembering a sticky fault for the destructor.
  // Inline, and no string is built unless the call failed: they wrap every
  // driver call on the launch and copy paths.
  void check(CUresult rc, const char* function, const char* detail = "") {
    if (rc != CUDA_SUCCESS) raise(rc, function, std::string(detail));
  }
  void check(CUresult rc, const char* function, const std::string& detail) {
    if (rc != CUDA_SUCCESS) raise(rc, function, detail);
  }
  [[noreturn]] void raise(CUresult rc, const char* function,
                          const std::string& detail = std::string());

  // Frees the graph-owned snapshots whose graphs are gone (cuda_snapshots.cpp).
  void free_released_snapshots() noexcept;

  // Red-zone machinery (cuda_redzone.cpp), all under redzone_mutex_.
  void redzone_prepare();  // internal stream, module (once), fallback decision
  void redzone_reserve(size_t n);
  void redzone_upload(const Range* ranges, size_t n);
  void redzone_release() noexcept;

  const DriverApi& api_;
  const int ordinal_;
  const CUdevice device_;
  const CUcontext context_;
  // Set once any call reports a sticky fault: the destructor then resets the
  // primary context.
  std::atomic<bool> faulted_{false};
  // Shared with the user objects that own copy_h2d_async's snapshots: their
  // destructors may run after this backend is gone.
  std::shared_ptr<SnapshotReleases> snapshot_releases_ = std::make_shared<SnapshotReleases>();

  std::mutex redzone_mutex_;
  CUstream redzone_stream_ = nullptr;
  CUmodule redzone_module_ = nullptr;
  CUfunction redzone_fill_ = nullptr;
  CUfunction redzone_count_ = nullptr;
  bool redzone_module_tried_ = false;
  CUdeviceptr redzone_scratch_ = 0;  // ranges, then counts
  size_t redzone_scratch_bytes_ = 0;
  std::vector<unsigned char> redzone_host_;  // the fallback's copies of the pads
  // Page-locked staging for range uploads and count downloads: a pageable
  // buffer would cost the driver a bounce copy on every scan.
  unsigned char* redzone_staging_ = nullptr;
  size_t redzone_staging_bytes_ = 0;
};

}  // namespace metrale::backend::cuda_impl
