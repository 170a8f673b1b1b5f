// Creation and destruction of the CUDA backend, its primary context, the
// device queries and the fault probe.
#include <memory>
#include <string>

#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend {
namespace {

// A failure while starting. 999 from a primary-context retain (a compute
// mode that forbids it, say) is a plain DRIVER error: there is no context
// yet to call lost. A real fault code (700, ...) is what the driver answers
// for the rest of the process after a sticky fault in any context: that is
// CONTEXT_LOST, and only a new process gets a working device again.
[[noreturn]] void fail_start(const cuda_impl::DriverApi& api, const char* function, CUresult rc) {
  metrale_status_t status = cuda_impl::status_for(rc);
  std::string detail;
  if (rc == CUDA_ERROR_UNKNOWN) {
    status = METRALE_ERROR_DRIVER;
  } else if (status == METRALE_ERROR_CONTEXT_LOST) {
    detail = "a sticky device fault earlier in this process left the device unusable; "
             "CUDA works again only in a new process";
  }
  fail(status, cuda_impl::failure_message(&api, function, rc, detail), static_cast<int>(rc));
}

}  // namespace

std::unique_ptr<Backend> make_cuda_backend(int device) {
  using namespace cuda_impl;
  const DriverApi& api = driver();  // NO_DRIVER / NO_DEVICE when it cannot start
  int count = 0;
  CUresult rc = api.deviceGetCount(&count);
  if (rc != CUDA_SUCCESS)
    fail(METRALE_ERROR_NO_DEVICE, failure_message(&api, "cuDeviceGetCount", rc),
         static_cast<int>(rc));
  if (count <= 0)
    fail(METRALE_ERROR_NO_DEVICE, "the NVIDIA driver reports no CUDA device");
  if (device < 0 || device >= count)
    fail(METRALE_ERROR_NO_DEVICE, "CUDA device " + std::to_string(device) +
                                      " does not exist: the driver reports " +
                                      std::to_string(count) + " device(s), ordinals 0.." +
                                      std::to_string(count - 1));
  CUdevice dev = 0;
  rc = api.deviceGet(&dev, device);
  if (rc != CUDA_SUCCESS) fail_start(api, "cuDeviceGet", rc);
  CUcontext ctx = nullptr;
  rc = api.primaryCtxRetain(&ctx, dev);
  if (rc != CUDA_SUCCESS) fail_start(api, "cuDevicePrimaryCtxRetain", rc);
  rc = api.ctxSetCurrent(ctx);
  if (rc != CUDA_SUCCESS) {
    api.primaryCtxRelease(dev);
    fail_start(api, "cuCtxSetCurrent", rc);
  }
  return std::make_unique<CudaBackend>(api, device, dev, ctx);
}

namespace cuda_impl {

CudaBackend::CudaBackend(const DriverApi& api, int ordinal, CUdevice device, CUcontext context)
    : api_(api), ordinal_(ordinal), device_(device), context_(context) {}

CudaBackend::~CudaBackend() {
  CUcontext current = nullptr;
  if (api_.ctxGetCurrent(&current) != CUDA_SUCCESS || current != context_)
    api_.ctxSetCurrent(context_);
  redzone_release();
  // Snapshots of graphs whose destructors have not run yet stay allocated
  // until the primary context goes (they are few and small).
  free_released_snapshots();
  api_.primaryCtxRelease(device_);
  if (faulted_.load()) {
    // After a sticky fault nobody can use this primary context again: every
    // call on it returns the fault, for us and for any other library that
    // shares it. Resetting it destroys it and frees its device memory, so a
    // driver that confines the fault to the context gives the next retain a
    // fresh one. (Checked on an H200 with driver 580: there an illegal
    // address poisons the whole process, and the next retain still answers
    // 700 after the reset; make_cuda_backend reports that as CONTEXT_LOST.)
    api_.primaryCtxReset(device_);
  }
}

void CudaBackend::set_current() { check(api_.ctxSetCurrent(context_), "cuCtxSetCurrent"); }

void CudaBackend::raise(CUresult rc, const char* function, const std::string& detail) {
  if (is_sticky(rc)) faulted_.store(true);
  throw_failure(&api_, function, rc, detail);
}

void CudaBackend::bind_thread() { make_current(); }

DeviceInfo CudaBackend::device_info() {
  make_current();
  DeviceInfo info;
  char name[256] = {0};
  check(api_.deviceGetName(name, static_cast<int>(sizeof name) - 1, device_), "cuDeviceGetName");
  info.name = name;
  check(api_.deviceGetAttribute(&info.compute_major,
                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device_),
        "cuDeviceGetAttribute");
  check(api_.deviceGetAttribute(&info.compute_minor,
                                CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device_),
        "cuDeviceGetAttribute");
  check(api_.deviceGetAttribute(&info.sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT,
                                device_),
        "cuDeviceGetAttribute");
  check(api_.deviceTotalMem(&info.total_memory, device_), "cuDeviceTotalMem_v2");
  info.ordinal = ordinal_;
  return info;
}

void CudaBackend::mem_info(size_t* free_bytes, size_t* total_bytes) {
  make_current();
  size_t free_b = 0, total_b = 0;
  check(api_.memGetInfo(&free_b, &total_b), "cuMemGetInfo_v2");
  *free_bytes = free_b;
  *total_bytes = total_b;
}

// No cuCtxSynchronize here. The primary context is shared with the CUDA
// runtime: a context-wide sync would stall every stream of the process
// (PyTorch's too) and, in global capture mode, invalidate a capture running
// on another thread. A sticky fault needs no waiting to be seen: once the
// context has one, every later call on it returns it. So one cheap call that
// waits for nothing, cuMemGetInfo, made in relaxed capture mode so that it
// can never count as an unsafe call during another thread's capture.
std::string CudaBackend::probe_fault() {
  CUcontext current = nullptr;
  CUresult rc = CUDA_SUCCESS;
  if (api_.ctxGetCurrent(&current) != CUDA_SUCCESS || current != context_)
    rc = api_.ctxSetCurrent(context_);
  const char* function = "cuCtxSetCurrent";
  if (rc == CUDA_SUCCESS) {
    RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
    size_t free_b = 0, total_b = 0;
    rc = api_.memGetInfo(&free_b, &total_b);
    function = "cuMemGetInfo_v2";
  }
  if (!is_sticky(rc)) return std::string();
  faulted_.store(true);
  return "the device context has a sticky fault: " + failure_message(&api_, function, rc);
}

bool CudaBackend::may_hide_fault(const Error& e) const {
  if (e.status() == METRALE_ERROR_CONTEXT_LOST || e.status() == METRALE_ERROR_CAPTURE) return false;
  // Errors without a driver code are this library's own checks.
  return e.driver_code() != 0 && cuda_impl::may_hide_fault(static_cast<CUresult>(e.driver_code()));
}

}  // namespace cuda_impl
}  // namespace metrale::backend
