// Kernel launches. Hot: with the core's and the backend's launch in one
// section (core/launch.cpp says why).
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;

METRALE_API __attribute__((hot)) metrale_status_t metrale_launch(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                            metrale_dim3_t grid, metrale_dim3_t block,
                                            uint32_t shared_bytes, metrale_stream_t* stream,
                                            void** params) {
  return guarded([&] { live(ctx)->launch(kernel, grid, block, shared_bytes, stream, params); });
}

METRALE_API __attribute__((hot)) metrale_status_t metrale_launch_packed(metrale_context_t* ctx,
                                                   metrale_kernel_t* kernel, metrale_dim3_t grid,
                                                   metrale_dim3_t block, uint32_t shared_bytes,
                                                   metrale_stream_t* stream, const void* args,
                                                   size_t args_bytes) {
  return guarded([&] {
    live(ctx)->launch_packed(kernel, grid, block, shared_bytes, stream, args, args_bytes);
  });
}
