// Several devices: the device count, peer access, peer copies and the
// process-wide ledger report (issue 13).
#include "api/guard.hpp"
#include "core/options.hpp"
#include "core/process_report.hpp"
#include "core/raw_enum.hpp"

using metrale::api::guarded;
using metrale::api::live;
using metrale::api::require;

METRALE_API metrale_status_t metrale_device_count(metrale_backend_t backend, int* count) {
  return guarded([&] {
    require(count, "count");
    const int n = metrale::core::device_count(metrale::core::raw_enum(backend));
    *count = n;
  });
}

METRALE_API metrale_status_t metrale_peer_access_query(metrale_context_t* ctx,
                                                       metrale_context_t* peer, int* can) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    metrale_context* p = live(peer);
    require(can, "can");
    const bool yes = c->peer_refusal(*p).empty();
    *can = yes ? 1 : 0;
  });
}

METRALE_API metrale_status_t metrale_peer_access_enable(metrale_context_t* ctx,
                                                        metrale_context_t* peer) {
  return guarded([&] { live(ctx)->peer_access_enable(*live(peer)); });
}

METRALE_API metrale_status_t metrale_copy_peer(metrale_context_t* src_ctx, metrale_devptr_t src,
                                               metrale_context_t* dst_ctx, metrale_devptr_t dst,
                                               size_t bytes) {
  return guarded([&] {
    metrale_context* s = live(src_ctx);
    s->copy_peer(src, *live(dst_ctx), dst, bytes);
  });
}

METRALE_API metrale_status_t metrale_copy_peer_async(metrale_context_t* src_ctx,
                                                     metrale_devptr_t src,
                                                     metrale_context_t* dst_ctx,
                                                     metrale_devptr_t dst, size_t bytes,
                                                     metrale_stream_t* stream) {
  return guarded([&] {
    metrale_context* s = live(src_ctx);
    s->copy_peer_async(src, *live(dst_ctx), dst, bytes, stream);
  });
}

METRALE_API metrale_status_t metrale_stream_native(metrale_context_t* ctx,
                                                   metrale_stream_t* stream, void** native) {
  return guarded([&] {
    metrale_context* c = live(ctx);
    require(native, "native");
    const uint64_t h = c->stream_native(stream);
    *native = reinterpret_cast<void*>(static_cast<uintptr_t>(h));
  });
}

METRALE_API metrale_status_t metrale_alloc_report_all(size_t top_n, size_t min_mib, char* buf,
                                                      size_t buflen, size_t* needed) {
  return guarded([&] {
    require(needed, "needed");
    if (buflen > 0) require(buf, "buf");
    metrale::core::process_alloc_report(top_n, min_mib, buf, buflen, needed);
  });
}

METRALE_API metrale_status_t metrale_device_live(metrale_backend_t backend, int device,
                                                 size_t* bytes, size_t* count) {
  return guarded([&] {
    const int raw = metrale::core::raw_enum(backend);
    if (raw != METRALE_BACKEND_CUDA && raw != METRALE_BACKEND_HOST) {
      metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                    "backend is " + std::to_string(raw) +
                        ": name the device's backend, METRALE_BACKEND_CUDA or METRALE_BACKEND_HOST");
    }
    if (device < 0) {
      metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                    "device is " + std::to_string(device) + ", a device ordinal is >= 0");
    }
    require(bytes, "bytes");
    size_t b = 0, c = 0;
    metrale::core::device_live(backend, device, &b, &c);
    *bytes = b;
    if (count != nullptr) *count = c;
  });
}
