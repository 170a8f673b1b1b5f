// The kernel-parameter packing rule: computing a layout, host kernels laid
// out by it, a kernel's known layout, and packed launches checked against it.
#include "api/guard.hpp"
#include "core/param_layout.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

namespace {

// Arrays of nparams entries: NULL only when there are none.
void require_array(const size_t* p, size_t nparams, const char* name) {
  if (nparams > 0) require(p, name);
}

}  // namespace

METRALE_API metrale_status_t metrale_param_layout(const size_t* sizes, const size_t* aligns,
                                                  size_t nparams, size_t* offsets,
                                                  size_t* args_bytes) {
  return guarded([&] {
    require_array(sizes, nparams, "sizes");
    require_array(aligns, nparams, "aligns");
    require_array(offsets, nparams, "offsets");
    size_t end = 0;
    // Computed whole before anything is written: a refused layout leaves
    // offsets and *args_bytes as they were.
    const std::vector<metrale::backend::ParamInfo> layout =
        metrale::core::natural_layout(sizes, aligns, nparams, &end);
    for (size_t i = 0; i < nparams; ++i) offsets[i] = layout[i].offset;
    if (args_bytes != nullptr) *args_bytes = end;
  });
}

METRALE_API metrale_status_t metrale_module_register_host_layout(
    metrale_context_t* ctx, const char* module, const char* func, metrale_host_kernel_fn fn,
    void* user, const size_t* param_sizes, const size_t* param_aligns, size_t nparams) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(module, "module");
    require(func, "func");
    require(reinterpret_cast<const void*>(fn), "fn");
    require_array(param_sizes, nparams, "param_sizes");
    require_array(param_aligns, nparams, "param_aligns");
    // A kernel without parameters still has a known (empty) layout.
    static const size_t kNone[1] = {0};
    c->register_host(module, func, fn, user, nparams > 0 ? param_sizes : kNone,
                     nparams > 0 ? param_aligns : kNone, nparams);
  });
}

METRALE_API metrale_status_t metrale_kernel_param_layout(metrale_context_t* ctx,
                                                         metrale_kernel_t* kernel,
                                                         size_t* offsets, size_t* sizes,
                                                         size_t cap, size_t* count) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(count, "count");
    require_array(offsets, cap, "offsets");
    require_array(sizes, cap, "sizes");
    c->kernel_param_layout(kernel, offsets, sizes, cap, count);
  });
}

METRALE_API metrale_status_t metrale_launch_packed_layout(
    metrale_context_t* ctx, metrale_kernel_t* kernel, metrale_dim3_t grid, metrale_dim3_t block,
    uint32_t shared_bytes, metrale_stream_t* stream, const void* args, size_t args_bytes,
    const size_t* offsets, const size_t* sizes, size_t nparams) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require_array(offsets, nparams, "offsets");
    require_array(sizes, nparams, "sizes");
    c->launch_packed_layout(kernel, grid, block, shared_bytes, stream, args, args_bytes, offsets,
                            sizes, nparams);
  });
}
