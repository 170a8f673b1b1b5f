// Several devices: peer access and copies between two contexts (issue 13).
// The source context owns the stream and the work (its counters, trace and
// fault state); each range is checked against its own context's checked
// pointers, and the backend checks each against its own device.
#include "core/context.hpp"

using metrale::fail;
using metrale::core::Counters;

namespace {

const char* kind_name(metrale_backend_t b) { return b == METRALE_BACKEND_CUDA ? "cuda" : "host"; }

}  // namespace

namespace {

std::string kinds_differ(metrale_backend_t mine, metrale_backend_t peer) {
  return std::string("ctx runs on the ") + kind_name(mine) + " backend and peer on the " +
         kind_name(peer) + " backend: peers must be of one backend";
}

}  // namespace

std::string metrale_context::peer_refusal(metrale_context& peer) {
  fault_.check();
  peer.fault_.check();
  if (&peer == this) return std::string();
  if (peer.backend_kind() != backend_kind()) return kinds_differ(backend_kind(), peer.backend_kind());
  return device([&] { return backend_->peer_refusal(*peer.backend_); });
}

// The backend refuses, saying why, when there is no peer path.
void metrale_context::peer_access_enable(metrale_context& peer) {
  fault_.check();
  peer.fault_.check();
  if (&peer == this) return;
  if (peer.backend_kind() != backend_kind()) {
    fail(METRALE_ERROR_UNSUPPORTED, kinds_differ(backend_kind(), peer.backend_kind()));
  }
  device([&] { backend_->peer_access_enable(*peer.backend_); });
}

namespace {

// Peer copies are never recorded into a graph: the graph would name the
// other context's memory and device past that context's life.
void refuse_capture(bool capturing, const char* what) {
  if (!capturing) return;
  fail(METRALE_ERROR_CAPTURE,
       std::string(what) +
           ": the stream is capturing, and a copy between two contexts is never recorded "
           "into a graph; nothing was recorded");
}

}  // namespace

// Each range against its own context's checked pointers.
void metrale_context::check_peer_ranges(DevPtr src, metrale_context& dst_ctx, DevPtr dst,
                                        size_t bytes) const {
  check_range(src, bytes, "source");
  dst_ctx.check_range(dst, bytes, "destination (in the peer context)");
}

void metrale_context::copy_peer(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes) {
  if (&dst_ctx == this) {
    copy_d2d(src, dst, bytes);  // one context: a plain copy
    return;
  }
  fault_.check();
  dst_ctx.fault_.check();
  metrale::core::StreamObj* st = default_stream_;
  if (bytes == 0) return;
  check_peer_ranges(src, dst_ctx, dst, bytes);
  refuse_capture(capturing(st), "copy_peer");
  refuse_wait_in_own_work(st->handle, "metrale_copy_peer");
  enqueue_peer(src, dst_ctx, dst, bytes, st);
  sync(st->handle, "copy_peer");
}

void metrale_context::copy_peer_async(DevPtr src, metrale_context& dst_ctx, DevPtr dst,
                                      size_t bytes, metrale_stream* s) {
  if (&dst_ctx == this) {
    copy_d2d_async(src, dst, bytes, s);
    return;
  }
  fault_.check();
  dst_ctx.fault_.check();
  metrale::core::StreamObj* st = stream_of(s);
  if (bytes == 0) return;
  check_peer_ranges(src, dst_ctx, dst, bytes);
  refuse_capture(capturing(st), "copy_peer_async");
  enqueue_peer(src, dst_ctx, dst, bytes, st);
}

uint64_t metrale_context::stream_native(metrale_stream* s) {
  fault_.check();
  metrale::core::StreamObj* st = stream_of(s);
  return backend_->native_stream(st->handle);
}

// Counted and traced as a d2d copy of the source context, once the backend
// took it.
void metrale_context::enqueue_peer(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes,
                                   metrale::core::StreamObj* st) {
  if (dst_ctx.backend_kind() != backend_kind()) {
    fail(METRALE_ERROR_UNSUPPORTED,
         std::string("copy_peer from a ") + kind_name(backend_kind()) + " context to a " +
             kind_name(dst_ctx.backend_kind()) + " context: peers must be of one backend");
  }
  device([&] { backend_->copy_peer_async(dst, *dst_ctx.backend_, src, bytes, st->handle); });
  trace_copy(METRALE_TRACE_D2D, src, dst, bytes);
  Counters::bump(counters_.d2d_copies);
  Counters::bump(counters_.d2d_bytes, bytes);
}
