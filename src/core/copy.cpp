// Copies and memsets: argument and bounds checks, counters, trace entries,
// then the backend's async operation (plus a wait for the synchronous ones).
#include <execinfo.h>

#include <cstdlib>
#include <limits>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::Error;
using metrale::fail;
using metrale::core::Counters;

namespace {

void need_host(const void* p, const char* name) {
  if (p == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(name) + " is NULL");
}

std::string backtrace_text() {
  void* frames[64];
  int n = backtrace(frames, 64);
  char** names = backtrace_symbols(frames, n);
  std::string out;
  for (int i = 1; i < n; ++i) {
    out += "  ";
    out += names != nullptr ? names[i] : "?";
    out += "\n";
  }
  std::free(names);
  return out;
}

// The bytes a pitched 2D range spans: (height-1) pitches plus one row.
size_t span_2d(size_t pitch, size_t width, size_t height) {
  size_t rows = height - 1;
  if (rows != 0 && pitch > (std::numeric_limits<size_t>::max() - width) / rows) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "pitch * height overflows the address space");
  }
  return rows * pitch + width;
}

}  // namespace

void metrale_context::trace_copy(metrale_trace_kind_t kind, uint64_t a, uint64_t b, uint64_t c) {
  if (!trace_on_.load(std::memory_order_relaxed)) return;
  metrale_trace_entry_t t{};
  t.kind = kind;
  t.nargs = 3;
  t.args[0] = a;
  t.args[1] = b;
  t.args[2] = c;
  trace_.push(t);
}

// The synchronous copies are the async ones on the default (or given)
// stream, then a wait for that stream.
void metrale_context::copy_h2d(const void* src, size_t bytes, DevPtr dst) {
  copy_h2d_async_retained(src, bytes, dst, nullptr);
  if (bytes != 0) sync(default_stream_->handle, "copy_h2d");
}

void metrale_context::copy_d2h(DevPtr src, void* dst, size_t bytes) {
  copy_d2h_on_stream(src, dst, bytes, nullptr);
}

void metrale_context::copy_d2h_on_stream(DevPtr src, void* dst, size_t bytes, metrale_stream* s) {
  copy_d2h_async(src, dst, bytes, s);
  if (bytes != 0) sync(stream_of(s)->handle, "copy_d2h");
}

void metrale_context::copy_d2h_async(DevPtr src, void* dst, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  need_host(dst, "dst");
  check_range(src, bytes, "source");
  device([&] { backend_->copy_d2h_async(dst, src, bytes, st->handle); });
  Counters::bump(counters_.d2h_copies);
  Counters::bump(counters_.d2h_bytes, bytes);
}

void metrale_context::copy_d2d(DevPtr src, DevPtr dst, size_t bytes) {
  copy_d2d_async(src, dst, bytes, nullptr);
  if (bytes != 0) sync(default_stream_->handle, "copy_d2d");
}

void metrale_context::copy_h2d_async(const void* src, size_t bytes, DevPtr dst,
                                     metrale_stream* s) {
  copy_h2d_async_retained(src, bytes, dst, s);
  if (bytes == 0) return;
  auto* st = stream_of(s);
  // The caller may reuse src on return, but a copy from page-locked memory
  // reads it later: wait for the stream.
  if (host_is_pinned(src, bytes)) {
    if (!warned_pinned_source_.exchange(true)) {
      metrale::core::log().warn(
          "copy_h2d_async from pinned host memory waits for the stream so the caller may "
          "reuse the source; use metrale_copy_h2d_async_retained to keep it asynchronous");
    }
    Counters::bump(counters_.pinned_source_waits);
    sync(st->handle, "copy_h2d_async (pinned source)");
  }
}

void metrale_context::copy_h2d_async_retained(const void* src, size_t bytes, DevPtr dst,
                                              metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  need_host(src, "src");
  check_range(dst, bytes, "destination");
  device([&] { backend_->copy_h2d_async(dst, src, bytes, st->handle); });
  Counters::bump(counters_.h2d_copies);
  Counters::bump(counters_.h2d_bytes, bytes);
}

void metrale_context::copy_d2d_async(DevPtr src, DevPtr dst, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  check_range(src, bytes, "source");
  check_range(dst, bytes, "destination");
  trace_copy(METRALE_TRACE_D2D, src, dst, bytes);
  try {
    device([&] { backend_->copy_d2d_async(dst, src, bytes, st->handle); });
  } catch (const Error& e) {
    metrale::core::log().error("copy_d2d_async failed ({}) at:\n{}", e.what(), backtrace_text());
    throw;
  }
  Counters::bump(counters_.d2d_copies);
  Counters::bump(counters_.d2d_bytes, bytes);
}

void metrale_context::copy_2d_async(DevPtr src, size_t src_pitch, DevPtr dst, size_t dst_pitch,
                                    size_t width, size_t height, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (src_pitch < width) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "src_pitch (" + std::to_string(src_pitch) +
                                             ") is smaller than width_bytes (" +
                                             std::to_string(width) + ")");
  }
  if (dst_pitch < width) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "dst_pitch (" + std::to_string(dst_pitch) +
                                             ") is smaller than width_bytes (" +
                                             std::to_string(width) + ")");
  }
  if (width == 0 || height == 0) return;
  if (width > std::numeric_limits<size_t>::max() / height) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "width_bytes * height overflows");
  }
  check_range(src, span_2d(src_pitch, width, height), "source");
  check_range(dst, span_2d(dst_pitch, width, height), "destination");
  trace_copy(METRALE_TRACE_D2D, src, dst, width * height);
  device([&] {
    backend_->copy_2d_async(dst, dst_pitch, src, src_pitch, width, height, st->handle);
  });
  Counters::bump(counters_.d2d_copies);
  Counters::bump(counters_.d2d_bytes, width * height);
}

void metrale_context::memset(DevPtr dst, uint8_t value, size_t bytes) {
  fault_.check();
  if (bytes == 0) return;
  check_range(dst, bytes, "destination");
  StreamHandle h = default_stream_->handle;
  device([&] { backend_->memset_async(dst, value, bytes, h); });
  sync(h, "memset");
  Counters::bump(counters_.memsets);
  Counters::bump(counters_.memset_bytes, bytes);
}

void metrale_context::memset_async(DevPtr dst, uint8_t value, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  check_range(dst, bytes, "destination");
  trace_copy(METRALE_TRACE_MEMSET, dst, value, bytes);
  device([&] { backend_->memset_async(dst, value, bytes, st->handle); });
  Counters::bump(counters_.memsets);
  Counters::bump(counters_.memset_bytes, bytes);
}
