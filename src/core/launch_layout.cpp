// The packing rule at launch: a packed launch that says where the caller put
// each parameter is checked against the kernel's own layout (the host
// registration's, or the driver's cuFuncGetParamInfo), so a buffer packed by
// another rule is refused instead of read as wrong values.
#include <algorithm>

#include "core/context.hpp"
#include "core/param_layout.hpp"

using metrale::fail;

void metrale_context::launch_packed_layout(metrale_kernel* k, metrale_dim3_t grid,
                                           metrale_dim3_t block, uint32_t shared,
                                           metrale_stream* s, const void* args,
                                           size_t args_bytes, const size_t* offsets,
                                           const size_t* sizes, size_t nparams) {
  fault_.check();
  const metrale::core::KernelObj* kern = kernel_of(k);
  // The kernel's layout first where known: its count is checked before the
  // caller's arrays are read. Without it (a host kernel registered without
  // sizes, a driver without cuFuncGetParamInfo) the caller's layout is all
  // there is: it must hold together, and the buffer goes as it is.
  if (kern->layout_known) {
    metrale::core::check_matches_kernel(kern->name, kern->params, offsets, sizes, nparams);
  }
  metrale::core::check_caller_layout(offsets, sizes, nparams, args_bytes);
  launch_packed(k, grid, block, shared, s, args, args_bytes);
}

void metrale_context::kernel_param_layout(metrale_kernel* k, size_t* offsets, size_t* sizes,
                                          size_t cap, size_t* count) {
  const metrale::core::KernelObj* kern = kernel_of(k);
  if (!kern->layout_known) {
    fail(METRALE_ERROR_UNSUPPORTED,
         std::string("the parameter layout of kernel ") + kern->name +
             " is unknown: a host kernel registered without parameter sizes, or a CUDA "
             "driver older than 12.4 (no cuFuncGetParamInfo)");
  }
  const size_t n = kern->params.size();
  const size_t copied = std::min(cap, n);
  for (size_t i = 0; i < copied; ++i) {
    offsets[i] = kern->params[i].offset;
    sizes[i] = kern->params[i].size;
  }
  *count = n;
  if (cap != 0 && cap < n) {
    fail(METRALE_ERROR_BUFFER_TOO_SMALL, "kernel " + std::string(kern->name) + " has " +
                                             std::to_string(n) + " parameters, cap is " +
                                             std::to_string(cap));
  }
}

uint64_t metrale_context::kernel_native(metrale_kernel* k) const {
  fault_.check();
  return backend_->native_function(kernel_of(k)->func);
}
