// The raw CUDA driver for the bench's baseline, opened with dlopen in the
// bench program itself (never linked: LIBRARY_PATH may point at the
// toolkit's stub). cuda.h gives types only; members carry no "cu" prefix
// because cuda.h #defines the unversioned names to versioned ones.
#pragma once

#include <cuda.h>

#include <string>

namespace bench {

struct RawDriver {
  CUresult(CUDAAPI* init)(unsigned int);
  CUresult(CUDAAPI* driverGetVersion)(int*);
  CUresult(CUDAAPI* deviceGet)(CUdevice*, int);
  CUresult(CUDAAPI* deviceGetName)(char*, int, CUdevice);
  CUresult(CUDAAPI* primaryCtxRetain)(CUcontext*, CUdevice);
  CUresult(CUDAAPI* primaryCtxRelease)(CUdevice);
  CUresult(CUDAAPI* ctxSetCurrent)(CUcontext);
  CUresult(CUDAAPI* ctxSynchronize)();
  CUresult(CUDAAPI* ctxGetCurrent)(CUcontext*);
  CUresult(CUDAAPI* getErrorName)(CUresult, const char**);
  CUresult(CUDAAPI* memAlloc)(CUdeviceptr*, size_t);
  CUresult(CUDAAPI* memFree)(CUdeviceptr);
  CUresult(CUDAAPI* memAllocAsync)(CUdeviceptr*, size_t, CUstream);
  CUresult(CUDAAPI* memFreeAsync)(CUdeviceptr, CUstream);
  // The device's default memory pool (what cuMemAllocAsync serves from):
  // its reserved high-water mark and release threshold for the pool trace.
  CUresult(CUDAAPI* deviceGetDefaultMemPool)(CUmemoryPool*, CUdevice);
  CUresult(CUDAAPI* memPoolGetAttribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult(CUDAAPI* memPoolSetAttribute)(CUmemoryPool, CUmemPool_attribute, void*);
  CUresult(CUDAAPI* memPoolTrimTo)(CUmemoryPool, size_t);
  CUresult(CUDAAPI* memHostAlloc)(void**, size_t, unsigned int);
  CUresult(CUDAAPI* memFreeHost)(void*);
  CUresult(CUDAAPI* memcpyHtoD)(CUdeviceptr, const void*, size_t);
  CUresult(CUDAAPI* memcpyDtoH)(void*, CUdeviceptr, size_t);
  CUresult(CUDAAPI* memcpyHtoDAsync)(CUdeviceptr, const void*, size_t, CUstream);
  CUresult(CUDAAPI* memcpyDtoHAsync)(void*, CUdeviceptr, size_t, CUstream);
  CUresult(CUDAAPI* memcpyDtoDAsync)(CUdeviceptr, CUdeviceptr, size_t, CUstream);
  CUresult(CUDAAPI* memsetD8Async)(CUdeviceptr, unsigned char, size_t, CUstream);
  CUresult(CUDAAPI* streamCreate)(CUstream*, unsigned int);
  CUresult(CUDAAPI* streamDestroy)(CUstream);
  CUresult(CUDAAPI* streamSynchronize)(CUstream);
  CUresult(CUDAAPI* streamIsCapturing)(CUstream, CUstreamCaptureStatus*);
  CUresult(CUDAAPI* streamBeginCapture)(CUstream, CUstreamCaptureMode);
  CUresult(CUDAAPI* streamEndCapture)(CUstream, CUgraph*);
  CUresult(CUDAAPI* graphInstantiateWithFlags)(CUgraphExec*, CUgraph, unsigned long long);
  CUresult(CUDAAPI* graphLaunch)(CUgraphExec, CUstream);
  CUresult(CUDAAPI* graphExecDestroy)(CUgraphExec);
  CUresult(CUDAAPI* graphDestroy)(CUgraph);
  CUresult(CUDAAPI* eventCreate)(CUevent*, unsigned int);
  CUresult(CUDAAPI* eventDestroy)(CUevent);
  CUresult(CUDAAPI* eventRecord)(CUevent, CUstream);
  CUresult(CUDAAPI* streamWaitEvent)(CUstream, CUevent, unsigned int);
  CUresult(CUDAAPI* moduleLoad)(CUmodule*, const char*);
  CUresult(CUDAAPI* moduleUnload)(CUmodule);
  CUresult(CUDAAPI* moduleGetFunction)(CUfunction*, CUmodule, const char*);
  CUresult(CUDAAPI* launchKernel)(CUfunction, unsigned, unsigned, unsigned, unsigned, unsigned,
                                  unsigned, unsigned, CUstream, void**, void**);
  // Optional (NULL on drivers before 12.4): only a diagnosis row uses it.
  CUresult(CUDAAPI* funcGetParamInfo)(CUfunction, size_t, size_t*, size_t*);
};

// Loads the table, cuInit(0), retains device `ordinal`'s primary context and
// makes it current on this thread. False with *why set when any step fails
// (no driver, the stub, no device).
bool open_raw_driver(int ordinal, RawDriver* api, CUdevice* dev, std::string* why);

// "CUDA_ERROR_X (n)" for a driver status.
std::string raw_error(const RawDriver& api, CUresult rc);

}  // namespace bench
