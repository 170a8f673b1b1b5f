// Copies, memsets and the red-zone pattern passes. Every device range is
// checked against the region map twice: at enqueue, so a bad range fails the
// call that made it (also while capturing), and again when the op runs under
// the map's shared lock, so memory freed between capture and replay is
// refused instead of written.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "backend/host/host_backend.hpp"
#include "backend/host/pattern_bytes.hpp"

namespace metrale::backend::host {

namespace {

void* as_host(DevPtr p) { return reinterpret_cast<void*>(static_cast<uintptr_t>(p)); }

// The bytes a pitched 2D block spans: (height - 1) rows of pitch, then one
// row of width. INVALID_ARGUMENT when that does not fit in size_t.
size_t pitched_span(size_t pitch, size_t width, size_t height, const char* which) {
  if (height - 1 > (SIZE_MAX - width) / pitch) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: copy_2d ") + which + " span (pitch " + std::to_string(pitch) +
             " x " + std::to_string(height) + " rows) overflows the address space");
  }
  return (height - 1) * pitch + width;
}

}  // namespace

void HostBackend::copy_h2d_async(DevPtr dst, const void* src, size_t bytes, StreamHandle s) {
  auto stream = usable_stream(s);
  if (bytes == 0) return;
  if (src == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: copy_h2d from NULL");
  regions_.check({{dst, bytes}});
  // A captured copy reads the host source at every replay, not now (the
  // caller promised to keep it: copy_h2d_async_retained).
  stream->submit([this, dst, src, bytes] {
    regions_.access({{dst, bytes}}, [&] { std::memmove(as_host(dst), src, bytes); });
  });
}

// The recorded op owns a copy of src made now; the graph frees it with
// itself, so the caller's buffer is never read after this returns.
void HostBackend::copy_h2d_snapshot_async(DevPtr dst, const void* src, size_t bytes,
                                          StreamHandle s) {
  auto stream = usable_stream(s);
  if (bytes == 0) return;
  if (src == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: copy_h2d from NULL");
  regions_.check({{dst, bytes}});
  const auto* first = static_cast<const unsigned char*>(src);
  auto copy = std::make_shared<const std::vector<unsigned char>>(first, first + bytes);
  stream->submit([this, dst, copy] {
    regions_.access({{dst, copy->size()}},
                    [&] { std::memmove(as_host(dst), copy->data(), copy->size()); });
  });
}

void HostBackend::copy_d2h_async(void* dst, DevPtr src, size_t bytes, StreamHandle s) {
  auto stream = usable_stream(s);
  if (bytes == 0) return;
  if (dst == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: copy_d2h to NULL");
  regions_.check({{src, bytes}});
  stream->submit([this, dst, src, bytes] {
    regions_.access({{src, bytes}}, [&] { std::memmove(dst, as_host(src), bytes); });
  });
}

void HostBackend::copy_d2d_async(DevPtr dst, DevPtr src, size_t bytes, StreamHandle s) {
  auto stream = usable_stream(s);
  if (bytes == 0) return;
  regions_.check({{dst, bytes}, {src, bytes}});
  // CUDA leaves overlapping d2d copies undefined; memmove makes them safe.
  stream->submit([this, dst, src, bytes] {
    regions_.access({{dst, bytes}, {src, bytes}},
                    [&] { std::memmove(as_host(dst), as_host(src), bytes); });
  });
}

void HostBackend::copy_2d_async(DevPtr dst, size_t dst_pitch, DevPtr src, size_t src_pitch,
                                size_t width_bytes, size_t height, StreamHandle s) {
  auto stream = usable_stream(s);
  if (src_pitch < width_bytes || dst_pitch < width_bytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: copy_2d pitch smaller than the row width (src_pitch " +
             std::to_string(src_pitch) + ", dst_pitch " + std::to_string(dst_pitch) + ", width " +
             std::to_string(width_bytes) + ")");
  }
  if (width_bytes == 0 || height == 0) return;
  const size_t src_span = pitched_span(src_pitch, width_bytes, height, "source");
  const size_t dst_span = pitched_span(dst_pitch, width_bytes, height, "destination");
  regions_.check({{dst, dst_span}, {src, src_span}});
  stream->submit([=] {
    regions_.access({{dst, dst_span}, {src, src_span}}, [&] {
      for (size_t row = 0; row < height; ++row) {
        std::memmove(as_host(dst + row * dst_pitch), as_host(src + row * src_pitch), width_bytes);
      }
    });
  });
}

void HostBackend::memset_async(DevPtr dst, uint8_t value, size_t bytes, StreamHandle s) {
  auto stream = usable_stream(s);
  if (bytes == 0) return;
  regions_.check({{dst, bytes}});
  stream->submit([this, dst, value, bytes] {
    regions_.access({{dst, bytes}}, [&] { std::memset(as_host(dst), value, bytes); });
  });
}

// store_bytes and count_other: pattern_bytes.hpp.

// Not stream work: it runs now and is finished on return.
void HostBackend::pattern_fill(const Range* ranges, size_t n, uint8_t byte) {
  fault_.throw_if_lost();
  if (n == 0) return;
  if (ranges == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: pattern_fill with NULL ranges");
  }
  regions_.access(ranges, n, [&] {
    for (size_t i = 0; i < n; ++i) {
      store_bytes(static_cast<uint8_t*>(as_host(ranges[i].ptr)), byte, ranges[i].bytes);
    }
  });
}

void HostBackend::pattern_count(const Range* ranges, size_t n, uint8_t byte, uint32_t* mismatches) {
  fault_.throw_if_lost();
  if (n == 0) return;
  if (ranges == nullptr || mismatches == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: pattern_count with NULL ranges or mismatches");
  }
  regions_.access(ranges, n, [&] {
    for (size_t i = 0; i < n; ++i) {
      const uint64_t differ =
          count_other(static_cast<const uint8_t*>(as_host(ranges[i].ptr)), byte, ranges[i].bytes);
      mismatches[i] = differ > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(differ);
      if (differ != 0 && refill_counted_) std::memset(as_host(ranges[i].ptr), byte, ranges[i].bytes);
    }
  });
}

}  // namespace metrale::backend::host
