// Modules and kernels: registered C functions, looked up by name, launched
// on a stream like any other op.
#include <string>

#include "backend/host/host_backend.hpp"
#include "backend/host/kernel_call.hpp"

namespace metrale::backend::host {

namespace {

void check_dims(const char* what, Dim3 d) {
  if (d.x == 0 || d.y == 0 || d.z == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: launch ") + what + " has a zero dimension (" +
             std::to_string(d.x) + ", " + std::to_string(d.y) + ", " + std::to_string(d.z) + ")");
  }
}

void set_shape(KernelCall* call, Dim3 grid, Dim3 block, uint32_t shared_bytes) {
  check_dims("grid", grid);
  check_dims("block", block);
  call->grid = metrale_dim3_t{grid.x, grid.y, grid.z};
  call->block = metrale_dim3_t{block.x, block.y, block.z};
  call->shared_bytes = shared_bytes;
}

}  // namespace

ModuleHandle HostBackend::module_load(const void*, size_t) {
  fail(METRALE_ERROR_UNSUPPORTED,
       "the host backend cannot load GPU module images (PTX, cubin, fatbin): register C "
       "functions with metrale_module_register_host");
}

void HostBackend::module_unload(ModuleHandle m) { kernels_.unload(m); }

FuncHandle HostBackend::module_function(ModuleHandle m, const char* name) {
  fault_.throw_if_lost();
  return kernels_.function(m, name);
}

ModuleHandle HostBackend::host_module_add(ModuleHandle m, const char* name,
                                          metrale_host_kernel_fn fn, void* user,
                                          const ParamInfo* layout, size_t nparams) {
  fault_.throw_if_lost();
  return kernels_.add(m, name, fn, user, layout, nparams);
}

bool HostBackend::function_params(FuncHandle f, std::vector<ParamInfo>* out) {
  std::shared_ptr<const HostFunction> function = kernels_.get(f);
  if (!function->sizes_known) return false;
  if (out != nullptr) *out = function->layout;
  return true;
}

void HostBackend::launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes, StreamHandle s,
                         void** params) {
  auto stream = usable_stream(s);
  KernelCall call = prepare_launch(kernels_.get(f), params);
  set_shape(&call, grid, block, shared_bytes);
  stream->submit([this, call = std::move(call)] { call.run(fault_); });
}

void HostBackend::launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                                StreamHandle s, const void* args, size_t args_bytes) {
  auto stream = usable_stream(s);
  KernelCall call = prepare_packed(kernels_.get(f), args, args_bytes);
  set_shape(&call, grid, block, shared_bytes);
  stream->submit([this, call = std::move(call)] { call.run(fault_); });
}

}  // namespace metrale::backend::host
