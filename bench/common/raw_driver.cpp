#include "raw_driver.hpp"

#include <dlfcn.h>

namespace bench {

namespace {
template <typename Fn>
bool resolve(void* lib, const char* symbol, Fn* out, std::string* missing) {
  *out = reinterpret_cast<Fn>(dlsym(lib, symbol));
  if (*out == nullptr && missing->empty()) *missing = symbol;
  return *out != nullptr;
}
}  // namespace

std::string raw_error(const RawDriver& api, CUresult rc) {
  const char* name = nullptr;
  if (api.getErrorName == nullptr || api.getErrorName(rc, &name) != CUDA_SUCCESS ||
      name == nullptr)
    name = "CUDA_ERROR_UNKNOWN_CODE";
  return std::string(name) + " (" + std::to_string(static_cast<int>(rc)) + ")";
}

bool open_raw_driver(int ordinal, RawDriver* a, CUdevice* dev, std::string* why) {
  *a = RawDriver{};
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) {
    const char* e = dlerror();
    *why = std::string("dlopen(libcuda.so.1) failed: ") + (e ? e : "unknown");
    return false;
  }
  std::string missing;
  resolve(lib, "cuInit", &a->init, &missing);
  resolve(lib, "cuDriverGetVersion", &a->driverGetVersion, &missing);
  resolve(lib, "cuDeviceGet", &a->deviceGet, &missing);
  resolve(lib, "cuDeviceGetName", &a->deviceGetName, &missing);
  resolve(lib, "cuDevicePrimaryCtxRetain", &a->primaryCtxRetain, &missing);
  resolve(lib, "cuDevicePrimaryCtxRelease_v2", &a->primaryCtxRelease, &missing);
  resolve(lib, "cuCtxSetCurrent", &a->ctxSetCurrent, &missing);
  resolve(lib, "cuCtxSynchronize", &a->ctxSynchronize, &missing);
  resolve(lib, "cuCtxGetCurrent", &a->ctxGetCurrent, &missing);
  resolve(lib, "cuGetErrorName", &a->getErrorName, &missing);
  resolve(lib, "cuMemAlloc_v2", &a->memAlloc, &missing);
  resolve(lib, "cuMemFree_v2", &a->memFree, &missing);
  resolve(lib, "cuMemAllocAsync", &a->memAllocAsync, &missing);
  resolve(lib, "cuMemFreeAsync", &a->memFreeAsync, &missing);
  resolve(lib, "cuDeviceGetDefaultMemPool", &a->deviceGetDefaultMemPool, &missing);
  resolve(lib, "cuMemPoolGetAttribute", &a->memPoolGetAttribute, &missing);
  resolve(lib, "cuMemPoolSetAttribute", &a->memPoolSetAttribute, &missing);
  resolve(lib, "cuMemPoolTrimTo", &a->memPoolTrimTo, &missing);
  resolve(lib, "cuMemHostAlloc", &a->memHostAlloc, &missing);
  resolve(lib, "cuMemFreeHost", &a->memFreeHost, &missing);
  resolve(lib, "cuMemcpyHtoD_v2", &a->memcpyHtoD, &missing);
  resolve(lib, "cuMemcpyDtoH_v2", &a->memcpyDtoH, &missing);
  resolve(lib, "cuMemcpyHtoDAsync_v2", &a->memcpyHtoDAsync, &missing);
  resolve(lib, "cuMemcpyDtoHAsync_v2", &a->memcpyDtoHAsync, &missing);
  resolve(lib, "cuMemcpyDtoDAsync_v2", &a->memcpyDtoDAsync, &missing);
  resolve(lib, "cuMemsetD8Async", &a->memsetD8Async, &missing);
  resolve(lib, "cuStreamCreate", &a->streamCreate, &missing);
  resolve(lib, "cuStreamDestroy_v2", &a->streamDestroy, &missing);
  resolve(lib, "cuStreamSynchronize", &a->streamSynchronize, &missing);
  resolve(lib, "cuStreamIsCapturing", &a->streamIsCapturing, &missing);
  resolve(lib, "cuStreamBeginCapture_v2", &a->streamBeginCapture, &missing);
  resolve(lib, "cuStreamEndCapture", &a->streamEndCapture, &missing);
  resolve(lib, "cuGraphInstantiateWithFlags", &a->graphInstantiateWithFlags, &missing);
  resolve(lib, "cuGraphLaunch", &a->graphLaunch, &missing);
  resolve(lib, "cuGraphExecDestroy", &a->graphExecDestroy, &missing);
  resolve(lib, "cuGraphDestroy", &a->graphDestroy, &missing);
  resolve(lib, "cuEventCreate", &a->eventCreate, &missing);
  resolve(lib, "cuEventDestroy_v2", &a->eventDestroy, &missing);
  resolve(lib, "cuEventRecord", &a->eventRecord, &missing);
  resolve(lib, "cuStreamWaitEvent", &a->streamWaitEvent, &missing);
  resolve(lib, "cuModuleLoad", &a->moduleLoad, &missing);
  resolve(lib, "cuModuleUnload", &a->moduleUnload, &missing);
  resolve(lib, "cuModuleGetFunction", &a->moduleGetFunction, &missing);
  resolve(lib, "cuLaunchKernel", &a->launchKernel, &missing);
  std::string optional;
  resolve(lib, "cuFuncGetParamInfo", &a->funcGetParamInfo, &optional);
  CUresult rc = a->init != nullptr ? a->init(0) : CUDA_ERROR_NOT_FOUND;
  if (rc != CUDA_SUCCESS) {
    *why = "cuInit failed: " + raw_error(*a, rc);
    if (rc == CUDA_ERROR_STUB_LIBRARY) *why += " (the toolkit's stub libcuda, not a driver)";
    return false;
  }
  if (!missing.empty()) {
    *why = "libcuda.so.1 has no " + missing;
    return false;
  }
  CUcontext ctx = nullptr;
  if ((rc = a->deviceGet(dev, ordinal)) != CUDA_SUCCESS ||
      (rc = a->primaryCtxRetain(&ctx, *dev)) != CUDA_SUCCESS ||
      (rc = a->ctxSetCurrent(ctx)) != CUDA_SUCCESS) {
    *why = "device " + std::to_string(ordinal) + ": " + raw_error(*a, rc);
    return false;
  }
  return true;
}

}  // namespace bench
