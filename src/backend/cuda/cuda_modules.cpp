// Modules (PTX, cubin, fatbin), kernel lookup, parameter layout, launches.
#include <cstring>
#include <string>
#include <vector>

#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {
namespace {

CUfunction as_function(FuncHandle f) { return reinterpret_cast<CUfunction>(f); }

// Binary images carry their size inside; PTX is text that cuModuleLoadData
// reads up to a NUL, which a caller's buffer of `size` bytes may lack.
bool is_binary_image(const unsigned char* p, size_t size) {
  static const unsigned char kElf[4] = {0x7f, 'E', 'L', 'F'};
  static const unsigned char kFatbin[4] = {0x50, 0xed, 0x55, 0xba};  // 0xba55ed50 LE
  return size >= 4 && (std::memcmp(p, kElf, 4) == 0 || std::memcmp(p, kFatbin, 4) == 0);
}

}  // namespace

ModuleHandle CudaBackend::module_load(const void* image, size_t size) {
  if (image == nullptr || size == 0)
    fail(METRALE_ERROR_INVALID_ARGUMENT, "module image is empty");
  make_current();
  const auto* bytes = static_cast<const unsigned char*>(image);
  std::vector<unsigned char> text;
  const void* data = image;
  if (!is_binary_image(bytes, size) && std::memchr(bytes, 0, size) == nullptr) {
    text.assign(bytes, bytes + size);
    text.push_back(0);
    data = text.data();
  }
  CUmodule module = nullptr;
  check(api_.moduleLoadData(&module, data), "cuModuleLoadData",
        "image of " + std::to_string(size) + " bytes");
  return reinterpret_cast<ModuleHandle>(module);
}

void CudaBackend::module_unload(ModuleHandle m) {
  if (m == 0) return;
  make_current();
  CUresult rc = api_.moduleUnload(reinterpret_cast<CUmodule>(m));
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuModuleUnload");
}

FuncHandle CudaBackend::module_function(ModuleHandle m, const char* name) {
  make_current();
  CUfunction func = nullptr;
  CUresult rc = api_.moduleGetFunction(&func, reinterpret_cast<CUmodule>(m), name);
  if (rc != CUDA_SUCCESS)
    raise(rc, "cuModuleGetFunction",
          std::string("function '") + (name != nullptr ? name : "(null)") + "'");
  return reinterpret_cast<FuncHandle>(func);
}

ModuleHandle CudaBackend::host_module_add(ModuleHandle, const char*, metrale_host_kernel_fn,
                                          void*, const ParamInfo*, size_t) {
  fail(METRALE_ERROR_UNSUPPORTED,
       "host kernels can only be registered on the host backend; this context runs on cuda");
}

bool CudaBackend::function_params(FuncHandle f, std::vector<ParamInfo>* out) {
  if (api_.funcGetParamInfo == nullptr) return false;  // driver older than 12.4
  make_current();
  std::vector<ParamInfo> params;
  for (size_t index = 0;; ++index) {
    size_t offset = 0, size = 0;
    CUresult rc = api_.funcGetParamInfo(as_function(f), index, &offset, &size);
    // The driver answers INVALID_VALUE for the first index past the last
    // parameter (index 0 for a kernel without parameters).
    if (rc == CUDA_ERROR_INVALID_VALUE) break;
    if (rc == CUDA_ERROR_NOT_SUPPORTED) return false;
    check(rc, "cuFuncGetParamInfo");
    params.push_back(ParamInfo{offset, size});
  }
  *out = std::move(params);
  return true;
}

// A launch on a stream of ours is first made as is, without the
// cuCtxGetCurrent of make_current(): the thread almost always has our
// context current already (the first call of any other kind made it so),
// and that query was a tenth of the library's own cost per launch. A
// launch the driver refuses enqueues nothing, so when it fails (no or
// another context current, or any other error) our context is made
// current and the launch made again; that answer, or its error, is the
// one returned (as stream_is_capturing). The driver measured (580, CUDA
// 13) takes the launch as is on a thread with no or another context
// current (test_driver_truth), so the retry is a net for drivers that do
// not. The NULL stream means the current context's, so it always gets
// make_current() first.
[[gnu::hot]] CUresult CudaBackend::launch_current(CUfunction f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                                     StreamHandle s, void** params, void** extra) {
  if (s != 0) {
    const CUresult rc = api_.launchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z,
                                          shared_bytes, as_stream(s), params, extra);
    if (rc == CUDA_SUCCESS) return rc;
  }
  make_current();  // then the same launch again
  return api_.launchKernel(f, grid.x, grid.y, grid.z, block.x, block.y, block.z, shared_bytes,
                           as_stream(s), params, extra);
}

[[gnu::hot]] void CudaBackend::launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                         StreamHandle s, void** params) {
  check(launch_current(as_function(f), grid, block, shared_bytes, s, params, nullptr),
        "cuLaunchKernel");
}

[[gnu::hot]] void CudaBackend::launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                                StreamHandle s, const void* args, size_t args_bytes) {
  if (args_bytes == 0) {
    // A kernel without parameters: an empty argument buffer is not one the
    // driver accepts through `extra`.
    check(launch_current(as_function(f), grid, block, shared_bytes, s, nullptr, nullptr),
          "cuLaunchKernel");
    return;
  }
  size_t size = args_bytes;
  // The driver only reads the buffer; its API takes it as void*.
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, const_cast<void*>(args),
                   CU_LAUNCH_PARAM_BUFFER_SIZE, &size, CU_LAUNCH_PARAM_END};
  check(launch_current(as_function(f), grid, block, shared_bytes, s, nullptr, extra),
        "cuLaunchKernel");
}

}  // namespace metrale::backend::cuda_impl
