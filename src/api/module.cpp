// Modules, kernel lookup and host-kernel registration.
#include "api/guard.hpp"
#include "core/param_layout.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;
using metrale::api::require_nonzero;

METRALE_API metrale_status_t metrale_module_load_data(metrale_context_t* ctx, const char* name,
                                                      const void* image, size_t size) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(name, "name");
    require(image, "image");
    require_nonzero(size, "size");
    c->module_load_data(name, image, size);
  });
}

METRALE_API metrale_status_t metrale_module_load_file(metrale_context_t* ctx, const char* name,
                                                      const char* path) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(name, "name");
    require(path, "path");
    c->module_load_file(name, path);
  });
}

METRALE_API metrale_status_t metrale_module_unload(metrale_context_t* ctx, const char* name) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(name, "name");
    c->module_unload(name);
  });
}

METRALE_API int metrale_has_module(metrale_context_t* ctx, const char* name) {
  int found = 0;
  guarded([&] {
    metrale_context* c = live(ctx);
    require(name, "name");
    found = c->has_module(name) ? 1 : 0;
  });
  return found;
}

METRALE_API metrale_status_t metrale_kernel_get_at(metrale_context_t* ctx, const char* module,
                                                   const char* func, const char* file, int line,
                                                   metrale_kernel_t** kernel) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(module, "module");
    require(func, "func");
    require(kernel, "kernel");
    *kernel = c->kernel_get(module, func, file, line);
  });
}

METRALE_API metrale_status_t metrale_module_register_host(metrale_context_t* ctx,
                                                          const char* module, const char* func,
                                                          metrale_host_kernel_fn fn, void* user) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(module, "module");
    require(func, "func");
    require(reinterpret_cast<const void*>(fn), "fn");
    c->register_host(module, func, fn, user, nullptr, nullptr, 0);
  });
}

METRALE_API metrale_status_t metrale_module_register_host_params(
    metrale_context_t* ctx, const char* module, const char* func, metrale_host_kernel_fn fn,
    void* user, const size_t* param_sizes, size_t nparams) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(module, "module");
    require(func, "func");
    require(reinterpret_cast<const void*>(fn), "fn");
    if (nparams > 0) require(param_sizes, "param_sizes");
    metrale::core::check_param_count(nparams);  // before the array is read
    for (size_t i = 0; i < nparams; ++i) {
      if (param_sizes[i] == 0) {
        metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                      "param_sizes[" + std::to_string(i) + "] is 0");
      }
    }
    // A kernel without parameters still has a known (empty) layout.
    static const size_t kNoParams[1] = {0};
    c->register_host(module, func, fn, user, nparams > 0 ? param_sizes : kNoParams, nullptr,
                     nparams);
  });
}

METRALE_API metrale_status_t metrale_kernel_native(metrale_context_t* ctx,
                                                   metrale_kernel_t* kernel, void** native) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(native, "native");
    const uint64_t f = c->kernel_native(kernel);
    *native = reinterpret_cast<void*>(static_cast<uintptr_t>(f));
  });
}
