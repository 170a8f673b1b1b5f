// The CUDA driver API as a table of function pointers, filled from
// libcuda.so.1 with dlopen/dlsym at the first backend creation. The library
// never links libcuda: it loads and runs where there is no driver at all.
//
// cuda.h gives the types and constants only. It #defines many names to their
// versioned symbols (cuMemAlloc -> cuMemAlloc_v2, ...), so the members here
// carry no "cu" prefix and the symbols are looked up by their exact
// versioned names (driver_api.cpp).
#pragma once

#include <cuda.h>

namespace metrale::backend::cuda_impl {

struct DriverApi {
  // Initialisation, devices, primary context.
  CUresult(CUDAAPI* init)(unsigned int flags);
  CUresult(CUDAAPI* driverGetVersion)(int* version);
  CUresult(CUDAAPI* deviceGetCount)(int* count);
  CUresult(CUDAAPI* deviceGet)(CUdevice* dev, int ordinal);
  CUresult(CUDAAPI* deviceGetName)(char* name, int len, CUdevice dev);
  CUresult(CUDAAPI* deviceGetAttribute)(int* value, CUdevice_attribute attr, CUdevice dev);
  CUresult(CUDAAPI* deviceTotalMem)(size_t* bytes, CUdevice dev);
  CUresult(CUDAAPI* primaryCtxRetain)(CUcontext* ctx, CUdevice dev);
  CUresult(CUDAAPI* primaryCtxRelease)(CUdevice dev);
  CUresult(CUDAAPI* primaryCtxReset)(CUdevice dev);
  CUresult(CUDAAPI* ctxSetCurrent)(CUcontext ctx);
  CUresult(CUDAAPI* ctxGetCurrent)(CUcontext* ctx);
  CUresult(CUDAAPI* ctxSynchronize)();
  CUresult(CUDAAPI* getErrorName)(CUresult error, const char** name);
  CUresult(CUDAAPI* getErrorString)(CUresult error, const char** text);

  // Memory.
  CUresult(CUDAAPI* memGetInfo)(size_t* free_bytes, size_t* total_bytes);
  CUresult(CUDAAPI* memAlloc)(CUdeviceptr* dptr, size_t bytes);
  CUresult(CUDAAPI* memAllocManaged)(CUdeviceptr* dptr, size_t bytes, unsigned int flags);
  CUresult(CUDAAPI* memFree)(CUdeviceptr dptr);
  CUresult(CUDAAPI* memHostAlloc)(void** ptr, size_t bytes, unsigned int flags);
  CUresult(CUDAAPI* memFreeHost)(void* ptr);
  CUresult(CUDAAPI* memHostRegister)(void* ptr, size_t bytes, unsigned int flags);
  CUresult(CUDAAPI* memHostUnregister)(void* ptr);
  CUresult(CUDAAPI* memHostGetDevicePointer)(CUdeviceptr* dptr, void* ptr, unsigned int flags);
  // What the driver knows of any pointer, whoever allocated or pinned it.
  CUresult(CUDAAPI* pointerGetAttribute)(void* data, CUpointer_attribute attribute,
                                         CUdeviceptr ptr);
  CUresult(CUDAAPI* pointerGetAttributes)(unsigned int count, CUpointer_attribute* attributes,
                                          void** data, CUdeviceptr ptr);

  // Copies and memsets.
  CUresult(CUDAAPI* memcpyHtoDAsync)(CUdeviceptr dst, const void* src, size_t bytes,
                                     CUstream stream);
  CUresult(CUDAAPI* memcpyDtoHAsync)(void* dst, CUdeviceptr src, size_t bytes, CUstream stream);
  CUresult(CUDAAPI* memcpyDtoDAsync)(CUdeviceptr dst, CUdeviceptr src, size_t bytes,
                                     CUstream stream);
  CUresult(CUDAAPI* memcpy2DAsync)(const CUDA_MEMCPY2D* copy, CUstream stream);
  CUresult(CUDAAPI* memsetD8Async)(CUdeviceptr dst, unsigned char value, size_t bytes,
                                   CUstream stream);

  // Streams and events.
  CUresult(CUDAAPI* streamCreate)(CUstream* stream, unsigned int flags);
  CUresult(CUDAAPI* streamDestroy)(CUstream stream);
  CUresult(CUDAAPI* streamSynchronize)(CUstream stream);
  CUresult(CUDAAPI* streamIsCapturing)(CUstream stream, CUstreamCaptureStatus* status);
  // Optional (nullptr when absent): which context a wrapped stream belongs to.
  CUresult(CUDAAPI* streamGetCtx)(CUstream stream, CUcontext* ctx);
  CUresult(CUDAAPI* streamWaitEvent)(CUstream stream, CUevent event, unsigned int flags);
  CUresult(CUDAAPI* eventCreate)(CUevent* event, unsigned int flags);
  CUresult(CUDAAPI* eventDestroy)(CUevent event);
  CUresult(CUDAAPI* eventRecord)(CUevent event, CUstream stream);
  CUresult(CUDAAPI* eventSynchronize)(CUevent event);
  CUresult(CUDAAPI* eventQuery)(CUevent event);
  CUresult(CUDAAPI* eventElapsedTime)(float* ms, CUevent start, CUevent end);

  // Graphs by stream capture.
  CUresult(CUDAAPI* streamBeginCapture)(CUstream stream, CUstreamCaptureMode mode);
  CUresult(CUDAAPI* streamEndCapture)(CUstream stream, CUgraph* graph);
  CUresult(CUDAAPI* graphInstantiateWithFlags)(CUgraphExec* exec, CUgraph graph,
                                               unsigned long long flags);
  CUresult(CUDAAPI* graphLaunch)(CUgraphExec exec, CUstream stream);
  CUresult(CUDAAPI* graphExecDestroy)(CUgraphExec exec);
  CUresult(CUDAAPI* graphDestroy)(CUgraph graph);

  // Modules and launches.
  CUresult(CUDAAPI* moduleLoadData)(CUmodule* module, const void* image);
  CUresult(CUDAAPI* moduleUnload)(CUmodule module);
  CUresult(CUDAAPI* moduleGetFunction)(CUfunction* func, CUmodule module, const char* name);
  CUresult(CUDAAPI* launchKernel)(CUfunction f, unsigned int grid_x, unsigned int grid_y,
                                  unsigned int grid_z, unsigned int block_x,
                                  unsigned int block_y, unsigned int block_z,
                                  unsigned int shared_bytes, CUstream stream, void** params,
                                  void** extra);

  // Graph-owned snapshots (cuda_snapshots.cpp). Optional (CUDA 11.3+): null
  // when the driver lacks them, and copy_h2d_async then refuses in a capture.
  CUresult(CUDAAPI* threadExchangeStreamCaptureMode)(CUstreamCaptureMode* mode);
  // The ABI of cuStreamGetCaptureInfo_v2, looked up by that exact name:
  // cuda.h 13 maps the unversioned name to _v3, which has another signature.
  CUresult(CUDAAPI* streamGetCaptureInfo)(CUstream stream, CUstreamCaptureStatus* status,
                                          cuuint64_t* id, CUgraph* graph,
                                          const CUgraphNode** deps, size_t* ndeps);
  CUresult(CUDAAPI* userObjectCreate)(CUuserObject* object, void* ptr, CUhostFn destroy,
                                      unsigned int initial_refcount, unsigned int flags);
  CUresult(CUDAAPI* userObjectRelease)(CUuserObject object, unsigned int count);
  CUresult(CUDAAPI* graphRetainUserObject)(CUgraph graph, CUuserObject object,
                                           unsigned int count, unsigned int flags);

  // Several devices (cuda_peers.cpp).
  CUresult(CUDAAPI* deviceCanAccessPeer)(int* can, CUdevice dev, CUdevice peer);
  CUresult(CUDAAPI* ctxEnablePeerAccess)(CUcontext peer, unsigned int flags);
  CUresult(CUDAAPI* memcpyPeerAsync)(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src,
                                     CUcontext src_ctx, size_t bytes, CUstream stream);

  // Optional: null when the driver lacks them.
  CUresult(CUDAAPI* getProcAddress)(const char* symbol, void** fn, int cuda_version,
                                    cuuint64_t flags,
                                    CUdriverProcAddressQueryResult* status);
  CUresult(CUDAAPI* funcGetParamInfo)(CUfunction f, size_t index, size_t* offset,
                                      size_t* size);  // CUDA 12.4+
};

// The process-wide table, loaded and cuInit-ed once. Throws NO_DRIVER when
// libcuda.so.1 is missing, is a stub, lacks a symbol or cuInit fails, and
// NO_DEVICE when cuInit says there is no device.
const DriverApi& driver();

}  // namespace metrale::backend::cuda_impl
