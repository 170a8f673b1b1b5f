// Opens libcuda.so.1 once per process and fills the DriverApi table.
#include "backend/cuda/driver_api.hpp"

#include <dlfcn.h>

#include <string>
#include <type_traits>

#include "backend/cuda/cuda_errors.hpp"
#include "backend/error.hpp"

namespace metrale::backend::cuda_impl {
namespace {

// The table's signatures must be cuda.h's own: a mismatch here would be a
// silent ABI bug at run time, so it is a compile error instead. The macro
// names (cuMemAlloc, ...) expand to the versioned declarations we dlsym.
#define METRALE_SAME_SIGNATURE(member, declared)                                     \
  static_assert(std::is_same<decltype(DriverApi::member), decltype(&declared)>::value, \
                #declared " and DriverApi::" #member " differ")
METRALE_SAME_SIGNATURE(init, cuInit);
METRALE_SAME_SIGNATURE(driverGetVersion, cuDriverGetVersion);
METRALE_SAME_SIGNATURE(deviceGetCount, cuDeviceGetCount);
METRALE_SAME_SIGNATURE(deviceGet, cuDeviceGet);
METRALE_SAME_SIGNATURE(deviceGetName, cuDeviceGetName);
METRALE_SAME_SIGNATURE(deviceGetAttribute, cuDeviceGetAttribute);
METRALE_SAME_SIGNATURE(deviceTotalMem, cuDeviceTotalMem);
METRALE_SAME_SIGNATURE(primaryCtxRetain, cuDevicePrimaryCtxRetain);
METRALE_SAME_SIGNATURE(primaryCtxRelease, cuDevicePrimaryCtxRelease);
METRALE_SAME_SIGNATURE(primaryCtxReset, cuDevicePrimaryCtxReset);
METRALE_SAME_SIGNATURE(ctxSetCurrent, cuCtxSetCurrent);
METRALE_SAME_SIGNATURE(ctxGetCurrent, cuCtxGetCurrent);
METRALE_SAME_SIGNATURE(ctxSynchronize, cuCtxSynchronize);
METRALE_SAME_SIGNATURE(getErrorName, cuGetErrorName);
METRALE_SAME_SIGNATURE(getErrorString, cuGetErrorString);
METRALE_SAME_SIGNATURE(memGetInfo, cuMemGetInfo);
METRALE_SAME_SIGNATURE(memAlloc, cuMemAlloc);
METRALE_SAME_SIGNATURE(memAllocManaged, cuMemAllocManaged);
METRALE_SAME_SIGNATURE(memFree, cuMemFree);
METRALE_SAME_SIGNATURE(memHostAlloc, cuMemHostAlloc);
METRALE_SAME_SIGNATURE(memFreeHost, cuMemFreeHost);
METRALE_SAME_SIGNATURE(memHostRegister, cuMemHostRegister);
METRALE_SAME_SIGNATURE(memHostUnregister, cuMemHostUnregister);
METRALE_SAME_SIGNATURE(memHostGetDevicePointer, cuMemHostGetDevicePointer);
METRALE_SAME_SIGNATURE(pointerGetAttribute, cuPointerGetAttribute);
METRALE_SAME_SIGNATURE(pointerGetAttributes, cuPointerGetAttributes);
METRALE_SAME_SIGNATURE(memcpyHtoDAsync, cuMemcpyHtoDAsync);
METRALE_SAME_SIGNATURE(memcpyDtoHAsync, cuMemcpyDtoHAsync);
METRALE_SAME_SIGNATURE(memcpyDtoDAsync, cuMemcpyDtoDAsync);
METRALE_SAME_SIGNATURE(memcpy2DAsync, cuMemcpy2DAsync);
METRALE_SAME_SIGNATURE(memsetD8Async, cuMemsetD8Async);
METRALE_SAME_SIGNATURE(streamCreate, cuStreamCreate);
METRALE_SAME_SIGNATURE(streamDestroy, cuStreamDestroy);
METRALE_SAME_SIGNATURE(streamSynchronize, cuStreamSynchronize);
METRALE_SAME_SIGNATURE(streamIsCapturing, cuStreamIsCapturing);
METRALE_SAME_SIGNATURE(streamGetCtx, cuStreamGetCtx);
METRALE_SAME_SIGNATURE(streamWaitEvent, cuStreamWaitEvent);
METRALE_SAME_SIGNATURE(eventCreate, cuEventCreate);
METRALE_SAME_SIGNATURE(eventDestroy, cuEventDestroy);
METRALE_SAME_SIGNATURE(eventRecord, cuEventRecord);
METRALE_SAME_SIGNATURE(eventSynchronize, cuEventSynchronize);
METRALE_SAME_SIGNATURE(eventQuery, cuEventQuery);
METRALE_SAME_SIGNATURE(eventElapsedTime, cuEventElapsedTime);
METRALE_SAME_SIGNATURE(streamBeginCapture, cuStreamBeginCapture);
METRALE_SAME_SIGNATURE(streamEndCapture, cuStreamEndCapture);
METRALE_SAME_SIGNATURE(graphInstantiateWithFlags, cuGraphInstantiateWithFlags);
METRALE_SAME_SIGNATURE(graphLaunch, cuGraphLaunch);
METRALE_SAME_SIGNATURE(graphExecDestroy, cuGraphExecDestroy);
METRALE_SAME_SIGNATURE(graphDestroy, cuGraphDestroy);
METRALE_SAME_SIGNATURE(moduleLoadData, cuModuleLoadData);
METRALE_SAME_SIGNATURE(moduleUnload, cuModuleUnload);
METRALE_SAME_SIGNATURE(moduleGetFunction, cuModuleGetFunction);
METRALE_SAME_SIGNATURE(launchKernel, cuLaunchKernel);
METRALE_SAME_SIGNATURE(threadExchangeStreamCaptureMode, cuThreadExchangeStreamCaptureMode);
METRALE_SAME_SIGNATURE(userObjectCreate, cuUserObjectCreate);
METRALE_SAME_SIGNATURE(userObjectRelease, cuUserObjectRelease);
METRALE_SAME_SIGNATURE(graphRetainUserObject, cuGraphRetainUserObject);
METRALE_SAME_SIGNATURE(deviceCanAccessPeer, cuDeviceCanAccessPeer);
METRALE_SAME_SIGNATURE(ctxEnablePeerAccess, cuCtxEnablePeerAccess);
METRALE_SAME_SIGNATURE(memcpyPeerAsync, cuMemcpyPeerAsync);
METRALE_SAME_SIGNATURE(getProcAddress, cuGetProcAddress);
METRALE_SAME_SIGNATURE(funcGetParamInfo, cuFuncGetParamInfo);
#undef METRALE_SAME_SIGNATURE

// What loading ended with, kept for the life of the process: a missing or
// stub driver does not turn into a working one while we run.
struct LoadResult {
  DriverApi api{};
  metrale_status_t status = METRALE_OK;
  std::string message;
  int driver_code = 0;
};

template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* out) {
  *out = reinterpret_cast<Fn>(dlsym(lib, symbol));
  return *out != nullptr;
}

// An optional entry point: cuGetProcAddress_v2 first (the driver's own
// answer for this ABI version), dlsym otherwise.
template <typename Fn>
void resolve_optional(void* lib, const DriverApi& api, const char* symbol, int cuda_version,
                      Fn* out) {
  *out = nullptr;
  if (api.getProcAddress != nullptr) {
    void* fn = nullptr;
    CUdriverProcAddressQueryResult found = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
    if (api.getProcAddress(symbol, &fn, cuda_version, CU_GET_PROC_ADDRESS_DEFAULT, &found) ==
            CUDA_SUCCESS &&
        found == CU_GET_PROC_ADDRESS_SUCCESS && fn != nullptr) {
      *out = reinterpret_cast<Fn>(fn);
      return;
    }
  }
  resolve(lib, symbol, out);
}

LoadResult load() {
  LoadResult r;
  // RTLD_LOCAL: the driver's symbols stay out of the global namespace, so
  // they never satisfy another library's references by accident.
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    r.status = METRALE_ERROR_NO_DRIVER;
    r.message = std::string("no NVIDIA driver: dlopen(\"libcuda.so.1\") failed: ") +
                (why != nullptr ? why : "unknown reason");
    return r;
  }
  DriverApi& a = r.api;
  const char* missing = nullptr;
  auto need = [&](const char* symbol, auto* member) {
    if (!resolve(lib, symbol, member) && missing == nullptr) missing = symbol;
  };
  need("cuInit", &a.init);
  need("cuDriverGetVersion", &a.driverGetVersion);
  need("cuDeviceGetCount", &a.deviceGetCount);
  need("cuDeviceGet", &a.deviceGet);
  need("cuDeviceGetName", &a.deviceGetName);
  need("cuDeviceGetAttribute", &a.deviceGetAttribute);
  need("cuDeviceTotalMem_v2", &a.deviceTotalMem);
  need("cuDevicePrimaryCtxRetain", &a.primaryCtxRetain);
  need("cuDevicePrimaryCtxRelease_v2", &a.primaryCtxRelease);
  need("cuDevicePrimaryCtxReset_v2", &a.primaryCtxReset);
  need("cuCtxSetCurrent", &a.ctxSetCurrent);
  need("cuCtxGetCurrent", &a.ctxGetCurrent);
  need("cuCtxSynchronize", &a.ctxSynchronize);
  need("cuGetErrorName", &a.getErrorName);
  need("cuGetErrorString", &a.getErrorString);
  need("cuMemGetInfo_v2", &a.memGetInfo);
  need("cuMemAlloc_v2", &a.memAlloc);
  need("cuMemAllocManaged", &a.memAllocManaged);
  need("cuMemFree_v2", &a.memFree);
  need("cuMemHostAlloc", &a.memHostAlloc);
  need("cuMemFreeHost", &a.memFreeHost);
  need("cuMemHostRegister_v2", &a.memHostRegister);
  need("cuMemHostUnregister", &a.memHostUnregister);
  need("cuMemHostGetDevicePointer_v2", &a.memHostGetDevicePointer);
  need("cuPointerGetAttribute", &a.pointerGetAttribute);
  need("cuPointerGetAttributes", &a.pointerGetAttributes);
  need("cuMemcpyHtoDAsync_v2", &a.memcpyHtoDAsync);
  need("cuMemcpyDtoHAsync_v2", &a.memcpyDtoHAsync);
  need("cuMemcpyDtoDAsync_v2", &a.memcpyDtoDAsync);
  need("cuMemcpy2DAsync_v2", &a.memcpy2DAsync);
  need("cuMemsetD8Async", &a.memsetD8Async);
  need("cuStreamCreate", &a.streamCreate);
  need("cuStreamDestroy_v2", &a.streamDestroy);
  need("cuStreamSynchronize", &a.streamSynchronize);
  need("cuStreamIsCapturing", &a.streamIsCapturing);
  need("cuStreamWaitEvent", &a.streamWaitEvent);
  need("cuEventCreate", &a.eventCreate);
  need("cuEventDestroy_v2", &a.eventDestroy);
  need("cuEventRecord", &a.eventRecord);
  need("cuEventSynchronize", &a.eventSynchronize);
  need("cuEventQuery", &a.eventQuery);
  // cuEventElapsedTime_v2 (12.8+) and the original have one signature.
  if (!resolve(lib, "cuEventElapsedTime_v2", &a.eventElapsedTime))
    need("cuEventElapsedTime", &a.eventElapsedTime);
  need("cuStreamBeginCapture_v2", &a.streamBeginCapture);
  need("cuStreamEndCapture", &a.streamEndCapture);
  need("cuGraphInstantiateWithFlags", &a.graphInstantiateWithFlags);
  need("cuGraphLaunch", &a.graphLaunch);
  need("cuGraphExecDestroy", &a.graphExecDestroy);
  need("cuGraphDestroy", &a.graphDestroy);
  need("cuModuleLoadData", &a.moduleLoadData);
  need("cuModuleUnload", &a.moduleUnload);
  need("cuModuleGetFunction", &a.moduleGetFunction);
  need("cuLaunchKernel", &a.launchKernel);
  need("cuDeviceCanAccessPeer", &a.deviceCanAccessPeer);
  need("cuCtxEnablePeerAccess", &a.ctxEnablePeerAccess);
  need("cuMemcpyPeerAsync", &a.memcpyPeerAsync);
  resolve(lib, "cuGetProcAddress_v2", &a.getProcAddress);
  // Optional: without them a capture refuses copy_h2d_async (CAPTURE).
  resolve(lib, "cuThreadExchangeStreamCaptureMode", &a.threadExchangeStreamCaptureMode);
  resolve(lib, "cuStreamGetCaptureInfo_v2", &a.streamGetCaptureInfo);
  resolve(lib, "cuUserObjectCreate", &a.userObjectCreate);
  // Optional: without it metrale_stream_wrap cannot check a stream's context.
  resolve(lib, "cuStreamGetCtx", &a.streamGetCtx);
  resolve(lib, "cuUserObjectRelease", &a.userObjectRelease);
  resolve(lib, "cuGraphRetainUserObject", &a.graphRetainUserObject);
  // The library handle is never closed: the table points into it for the
  // rest of the process, and unloading a driver is not something to do.
  // cuInit goes first so that a stub library is named as such even when it
  // lacks some symbol a real driver has.
  CUresult rc = a.init != nullptr ? a.init(0) : CUDA_SUCCESS;
  if (rc == CUDA_SUCCESS && missing != nullptr) {
    r.status = METRALE_ERROR_NO_DRIVER;
    r.message = std::string("the NVIDIA driver is too old: libcuda.so.1 has no ") + missing;
    return r;
  }
  resolve_optional(lib, a, "cuFuncGetParamInfo", 12040, &a.funcGetParamInfo);
  if (rc != CUDA_SUCCESS) {
    // 34 is the toolkit's stub libcuda; 35 a driver older than the runtime
    // wants; 100 a driver without devices. Only the last is "no device".
    r.status = rc == CUDA_ERROR_NO_DEVICE ? METRALE_ERROR_NO_DEVICE : METRALE_ERROR_NO_DRIVER;
    r.message = "cuInit failed: " + describe(&a, rc);
    if (rc == CUDA_ERROR_STUB_LIBRARY)
      r.message += " (libcuda.so.1 is the CUDA toolkit's stub, not a driver)";
    r.driver_code = static_cast<int>(rc);
  }
  return r;
}

}  // namespace

const DriverApi& driver() {
  static const LoadResult loaded = load();  // thread-safe, once per process
  if (loaded.status != METRALE_OK) fail(loaded.status, loaded.message, loaded.driver_code);
  return loaded.api;
}

}  // namespace metrale::backend::cuda_impl
