// Copies and memsets.
#include "api/guard.hpp"

using metrale::api::guarded;
using metrale::api::live;

METRALE_API metrale_status_t metrale_copy_h2d(metrale_context_t* ctx, const void* src,
                                              size_t bytes, metrale_devptr_t dst) {
  return guarded([&] { live(ctx)->copy_h2d(src, bytes, dst); });
}

METRALE_API metrale_status_t metrale_copy_d2h(metrale_context_t* ctx, metrale_devptr_t src,
                                              void* dst, size_t bytes) {
  return guarded([&] { live(ctx)->copy_d2h(src, dst, bytes); });
}

METRALE_API metrale_status_t metrale_copy_d2h_on_stream(metrale_context_t* ctx,
                                                        metrale_devptr_t src, void* dst,
                                                        size_t bytes, metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->copy_d2h_on_stream(src, dst, bytes, stream); });
}

METRALE_API metrale_status_t metrale_copy_d2h_async(metrale_context_t* ctx, metrale_devptr_t src,
                                                    void* dst, size_t bytes,
                                                    metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->copy_d2h_async(src, dst, bytes, stream); });
}

METRALE_API metrale_status_t metrale_copy_d2d(metrale_context_t* ctx, metrale_devptr_t src,
                                              metrale_devptr_t dst, size_t bytes) {
  return guarded([&] { live(ctx)->copy_d2d(src, dst, bytes); });
}

METRALE_API metrale_status_t metrale_copy_h2d_async(metrale_context_t* ctx, const void* src,
                                                    size_t bytes, metrale_devptr_t dst,
                                                    metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->copy_h2d_async(src, bytes, dst, stream); });
}

METRALE_API metrale_status_t metrale_copy_h2d_async_retained(metrale_context_t* ctx,
                                                             const void* src, size_t bytes,
                                                             metrale_devptr_t dst,
                                                             metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->copy_h2d_async_retained(src, bytes, dst, stream); });
}

METRALE_API metrale_status_t metrale_copy_d2d_async(metrale_context_t* ctx, metrale_devptr_t src,
                                                    metrale_devptr_t dst, size_t bytes,
                                                    metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->copy_d2d_async(src, dst, bytes, stream); });
}

METRALE_API metrale_status_t metrale_copy_d2d_2d_async(metrale_context_t* ctx,
                                                       metrale_devptr_t src, size_t src_pitch,
                                                       metrale_devptr_t dst, size_t dst_pitch,
                                                       size_t width_bytes, size_t height,
                                                       metrale_stream_t* stream) {
  return guarded([&] {
    live(ctx)->copy_2d_async(src, src_pitch, dst, dst_pitch, width_bytes, height, stream);
  });
}

METRALE_API metrale_status_t metrale_memset(metrale_context_t* ctx, metrale_devptr_t dptr,
                                            uint8_t value, size_t bytes) {
  return guarded([&] { live(ctx)->memset(dptr, value, bytes); });
}

METRALE_API metrale_status_t metrale_memset_async(metrale_context_t* ctx, metrale_devptr_t dptr,
                                                  uint8_t value, size_t bytes,
                                                  metrale_stream_t* stream) {
  return guarded([&] { live(ctx)->memset_async(dptr, value, bytes, stream); });
}
