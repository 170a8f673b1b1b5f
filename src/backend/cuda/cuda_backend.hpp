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
#include "backend/cuda/nvtx_memory.hpp"

namespace metrale::backend::cuda_impl {

// The driver's handles behind the backend's opaque ones.
inline CUstream as_stream(StreamHandle s) { return reinterpret_cast<CUstream>(s); }
inline CUevent as_event(EventHandle e) { return reinterpret_cast<CUevent>(e); }

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
  void pattern_count_table(const Range* table, size_t n, const uint32_t* changed,
                           size_t nchanged, bool whole, uint8_t byte,
                           std::vector<PadHit>* hits) override;
  void pattern_count(const Range* ranges, size_t n, uint8_t byte,
                     uint32_t* mismatches) override;
  uint64_t pad_check_async(const Range* ranges, size_t n, uint8_t byte, StreamHandle s) override;
  bool pad_check_take(uint64_t t, bool wait, PadCheck* out) override;

  StreamHandle stream_create() override;
  StreamHandle stream_wrap(uint64_t native, bool* owned) override;
  void stream_destroy(StreamHandle s) override;
  void stream_synchronize(StreamHandle s) override;
  bool stream_is_capturing(StreamHandle s) override;
  // Its slow path: our context made current first (the prologue stays small).
  [[gnu::noinline, gnu::cold]] bool stream_is_capturing_current(StreamHandle s);
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
                               void* user, const ParamInfo* layout,
                               size_t nparams) override;
  bool function_params(FuncHandle f, std::vector<ParamInfo>* out) override;
  void launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes, StreamHandle s,
              void** params) override;
  void launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                     StreamHandle s, const void* args, size_t args_bytes) override;

  // NVTX memory annotations (nvtx_memory.hpp): on only under a tool.
  bool mem_annotations_begin(Annotations mode) override {
    if (mode == Annotations::OFF) return false;
    try {
      make_current();  // compute-sanitizer wants CUDA up before NVTX
    } catch (const Error&) {
      return false;
    }
    return nvtx_.begin(mode == Annotations::ON);
  }
  void mem_annotate_chunk(DevPtr ptr, size_t bytes) noexcept override { nvtx_.chunk(ptr, bytes); }
  void mem_annotate_chunk_release(DevPtr ptr) noexcept override { nvtx_.chunk_release(ptr); }
  void mem_annotate_block(DevPtr ptr, size_t bytes) noexcept override { nvtx_.block(ptr, bytes); }
  void mem_annotate_block_release(DevPtr ptr) noexcept override { nvtx_.block_release(ptr); }

  std::string probe_fault() override;
  bool may_hide_fault(const Error& e) const override;

  // Peers (cuda_peers.cpp): cuDeviceCanAccessPeer, cuCtxEnablePeerAccess,
  // cuMemcpyPeerAsync between the primary contexts of two devices.
  std::string peer_refusal(Backend& peer) override;
  void peer_access_enable(Backend& peer) override;
  void copy_peer_async(DevPtr dst, Backend& dst_owner, DevPtr src, size_t bytes,
                       StreamHandle s) override;
  // A StreamHandle is the CUstream itself.
  uint64_t native_stream(StreamHandle s) override { return s; }
  uint64_t native_function(FuncHandle f) override { return f; }

 private:
  // Makes the primary context current on the calling thread when it is not.
  // Checked on every call rather than cached per thread: Go moves goroutines
  // between OS threads, and other libraries on the same thread may set their
  // own context in between. cuCtxGetCurrent only reads thread-local state.
  // cuLaunchKernel, made current only when the plain try fails (cuda_modules.cpp).
  CUresult launch_current(CUfunction f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                          StreamHandle s, void** params, void** extra);
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
  // The device-side pad table (cuda_redzone_table.cpp), under redzone_mutex_.
  bool table_reserve(size_t n);  // true when the table is new (empty)
  void table_staging_reserve(size_t bytes);
  void table_update(const Range* table, size_t n, const uint32_t* changed, size_t nchanged,
                    bool whole);
  void table_count(size_t n, uint8_t byte, std::vector<PadHit>* hits);
  void table_release() noexcept;
  // The stream-ordered pad checks' result slots (cuda_pad_check.cpp), under
  // redzone_mutex_.
  struct PadCheckSlot {
    unsigned char* host = nullptr;  // ranges, then results: page-locked, mapped
    CUdeviceptr device = 0;         // the same memory as kernels address it
    size_t bytes = 0;
    CUevent done = nullptr;         // recorded after the pass
    uint64_t ticket = 0;            // 0: free
    size_t n = 0;
  };
  PadCheckSlot* pad_slot_for(size_t n);  // a free slot with room for n, or nullptr
  void pad_slots_release() noexcept;

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
  // The pad table kept on the device between scans (pattern_count_table):
  // table_ holds table_capacity_ ranges, valid only while table_valid_ (set
  // when a call returned normally); table_results_ is a found-counter word
  // then room for table_capacity_ hits; table_patches_ the changed slots of
  // one scan. Uploads and the hits read back go through table_staging_
  // (page-locked).
  CUfunction redzone_patch_ = nullptr;
  CUfunction redzone_count_list_ = nullptr;
  CUfunction redzone_check_restore_ = nullptr;
  std::vector<PadCheckSlot> pad_slots_;
  uint64_t next_pad_ticket_ = 0;
  CUdeviceptr table_ = 0;
  CUdeviceptr table_results_ = 0;
  size_t table_capacity_ = 0;
  bool table_valid_ = false;
  CUdeviceptr table_patches_ = 0;
  size_t table_patches_capacity_ = 0;
  unsigned char* table_staging_ = nullptr;
  size_t table_staging_bytes_ = 0;

  NvtxMemory nvtx_;
};

}  // namespace metrale::backend::cuda_impl
