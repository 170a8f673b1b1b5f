// Copies and memsets: argument, bounds and capture checks, then the
// backend's async operation (plus a wait for the synchronous ones), then
// counters and trace entries.
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

// After the device range's check (a size past any allocation is
// OUT_OF_BOUNDS first): a host range past the end of the address space
// would reach the memcpy or the staging threads as a negative size.
void need_host_range(const void* p, size_t bytes, const char* name) {
  if (reinterpret_cast<uintptr_t>(p) > std::numeric_limits<uintptr_t>::max() - bytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string(name) + " range [" + metrale::core::hex(reinterpret_cast<uint64_t>(p)) +
             ", +" + std::to_string(bytes) + ") wraps past the end of the address space");
  }
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
  if (!watching(kWatchTrace)) return;
  metrale_trace_entry_t t{};
  t.kind = kind;
  t.nargs = 3;
  t.args[0] = a;
  t.args[1] = b;
  t.args[2] = c;
  trace_.push(t);
}

// Rule 1 of the header: a call that fails has recorded nothing. Every copy
// below checks its arguments, ranges and (for the calls that wait) the
// capture state first, and only then enqueues; counters and the trace move
// only once the backend has taken the work.

bool metrale_context::capturing(metrale::core::StreamObj* st) {
  // A failed query throws: the call fails before anything is enqueued.
  return device([&] { return backend_->stream_is_capturing(st->handle); });
}

// A call that waits for its stream cannot complete inside a capture: its
// copy would be recorded into the caller's graph (aimed at a buffer the
// caller may free once we return CAPTURE) and the wait would then fail.
void metrale_context::refuse_if_capturing(metrale::core::StreamObj* st, const char* what) {
  if (!capturing(st)) return;
  fail(METRALE_ERROR_CAPTURE,
       std::string(what) + " waits for its stream, which is capturing; nothing was recorded. "
                           "End or abort the capture first, or use the _async form");
}

void metrale_context::enqueue_h2d(const void* src, size_t bytes, DevPtr dst, metrale::core::StreamObj* st,
                                  bool snapshot) {
  device([&] {
    if (snapshot) {
      backend_->copy_h2d_snapshot_async(dst, src, bytes, st->handle);
    } else {
      backend_->copy_h2d_async(dst, src, bytes, st->handle);
    }
  });
  Counters::bump(counters_.h2d_copies);
  Counters::bump(counters_.h2d_bytes, bytes);
}

void metrale_context::enqueue_d2h(DevPtr src, void* dst, size_t bytes, metrale::core::StreamObj* st) {
  device([&] { backend_->copy_d2h_async(dst, src, bytes, st->handle); });
  Counters::bump(counters_.d2h_copies);
  Counters::bump(counters_.d2h_bytes, bytes);
}

// Pageable copies of at least staging_threshold bytes go through the pinned
// staging ring (core/staging), with the same counters as a direct copy. Not
// staged: pinned memory (the DMA reads it directly), a host kernel calling
// back in (its stream's work runs nested in this thread), and whatever the
// Stager declines (range it cannot vouch for, ring busy or unavailable).
bool metrale_context::stage_h2d(const void* src, size_t bytes, DevPtr dst,
                                metrale::core::StreamObj* st) {
  if (!staging_.wants(bytes) || backend_->in_stream_work(0) || host_is_pinned(src, bytes)) {
    return false;
  }
  if (!device([&] { return staging_.h2d(*backend_, dst, src, bytes, st->handle); })) return false;
  Counters::bump(counters_.h2d_copies);
  Counters::bump(counters_.h2d_bytes, bytes);
  return true;
}

bool metrale_context::stage_d2h(DevPtr src, void* dst, size_t bytes,
                                metrale::core::StreamObj* st) {
  if (!staging_.wants(bytes) || backend_->in_stream_work(0) || host_is_pinned(dst, bytes)) {
    return false;
  }
  if (!device([&] { return staging_.d2h(*backend_, dst, src, bytes, st->handle); })) return false;
  Counters::bump(counters_.d2h_copies);
  Counters::bump(counters_.d2h_bytes, bytes);
  return true;
}

void metrale_context::copy_h2d(const void* src, size_t bytes, DevPtr dst) {
  fault_.check();
  metrale::core::StreamObj* st = default_stream_;
  if (bytes == 0) return;
  need_host(src, "src");
  check_range(dst, bytes, "destination");
  need_host_range(src, bytes, "src");
  refuse_if_capturing(st, "copy_h2d");
  refuse_wait_in_own_work(st->handle, "metrale_copy_h2d");
  if (!stage_h2d(src, bytes, dst, st)) enqueue_h2d(src, bytes, dst, st, false);
  sync(st->handle, "copy_h2d");
}

void metrale_context::copy_d2h(DevPtr src, void* dst, size_t bytes) {
  copy_d2h_on_stream(src, dst, bytes, nullptr);
}

void metrale_context::copy_d2h_on_stream(DevPtr src, void* dst, size_t bytes, metrale_stream* s) {
  fault_.check();
  metrale::core::StreamObj* st = stream_of(s);
  if (bytes == 0) return;
  need_host(dst, "dst");
  check_range(src, bytes, "source");
  need_host_range(dst, bytes, "dst");
  refuse_if_capturing(st, "copy_d2h");
  refuse_wait_in_own_work(st->handle, "metrale_copy_d2h");
  if (!stage_d2h(src, dst, bytes, st)) enqueue_d2h(src, dst, bytes, st);
  sync(st->handle, "copy_d2h");
}

// Allowed while the stream captures: the graph then writes dst at every
// replay, which the header documents as the caller's choice. Staged only
// outside a capture; a staged copy has written dst on return.
void metrale_context::copy_d2h_async(DevPtr src, void* dst, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  need_host(dst, "dst");
  check_range(src, bytes, "source");
  need_host_range(dst, bytes, "dst");
  if (staging_.wants(bytes) && !capturing(st) && stage_d2h(src, dst, bytes, st)) return;
  enqueue_d2h(src, dst, bytes, st);
}

void metrale_context::copy_d2d(DevPtr src, DevPtr dst, size_t bytes) {
  fault_.check();
  metrale::core::StreamObj* st = default_stream_;
  if (bytes == 0) return;
  check_range(src, bytes, "source");
  check_range(dst, bytes, "destination");
  refuse_if_capturing(st, "copy_d2d");
  refuse_wait_in_own_work(st->handle, "metrale_copy_d2d");
  enqueue_d2d(src, dst, bytes, st);
  sync(st->handle, "copy_d2d");
}

void metrale_context::copy_h2d_async(const void* src, size_t bytes, DevPtr dst,
                                     metrale_stream* s) {
  fault_.check();
  metrale::core::StreamObj* st = stream_of(s);
  if (bytes == 0) return;
  need_host(src, "src");
  check_range(dst, bytes, "destination");
  need_host_range(src, bytes, "src");
  // The caller may reuse src on return. In a capture the graph must not
  // keep src: the backend copies it into memory the graph owns.
  if (capturing(st)) {
    enqueue_h2d(src, bytes, dst, st, true);
    return;
  }
  // Pageable and large: staged, src read completely before return.
  if (stage_h2d(src, bytes, dst, st)) return;
  // From pinned memory it waits for the stream (below): a host kernel on
  // that stream is refused before anything is enqueued (rule 5).
  const bool pinned = host_is_pinned(src, bytes);
  if (pinned && backend_->in_stream_work(st->handle)) {
    refuse_wait_in_own_work(st->handle, "copy_h2d_async from pinned memory");
  }
  enqueue_h2d(src, bytes, dst, st, false);
  // Outside a capture a copy from page-locked memory reads src later: wait.
  if (pinned) {
    if (!warned_pinned_source_.exchange(true)) {
      metrale::core::log().warn(
          "copy_h2d_async from pinned host memory waits for the stream so the caller may "
          "reuse the source; use metrale_copy_h2d_async_retained to keep it asynchronous");
    }
    Counters::bump(counters_.pinned_source_waits);
    sync(st->handle, "copy_h2d_async (pinned source)");
  }
}

// src is read when the stream reaches the copy, at every replay when
// captured: the caller promised to keep it (header).
void metrale_context::copy_h2d_async_retained(const void* src, size_t bytes, DevPtr dst,
                                              metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  need_host(src, "src");
  check_range(dst, bytes, "destination");
  need_host_range(src, bytes, "src");
  enqueue_h2d(src, bytes, dst, st, false);
}

// The d2d body both d2d calls share: enqueue, then trace and count.
void metrale_context::enqueue_d2d(DevPtr src, DevPtr dst, size_t bytes, metrale::core::StreamObj* st) {
  try {
    device([&] { backend_->copy_d2d_async(dst, src, bytes, st->handle); });
  } catch (const Error& e) {
    metrale::core::log().error("copy_d2d_async failed ({}) at:\n{}", e.what(), backtrace_text());
    throw;
  }
  trace_copy(METRALE_TRACE_D2D, src, dst, bytes);
  Counters::bump(counters_.d2d_copies);
  Counters::bump(counters_.d2d_bytes, bytes);
}

void metrale_context::copy_d2d_async(DevPtr src, DevPtr dst, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  check_range(src, bytes, "source");
  check_range(dst, bytes, "destination");
  enqueue_d2d(src, dst, bytes, st);
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
  device([&] {
    backend_->copy_2d_async(dst, dst_pitch, src, src_pitch, width, height, st->handle);
  });
  trace_copy(METRALE_TRACE_D2D, src, dst, width * height);
  Counters::bump(counters_.d2d_copies);
  Counters::bump(counters_.d2d_bytes, width * height);
}

void metrale_context::memset(DevPtr dst, uint8_t value, size_t bytes) {
  fault_.check();
  if (bytes == 0) return;
  check_range(dst, bytes, "destination");
  refuse_if_capturing(default_stream_, "memset");
  StreamHandle h = default_stream_->handle;
  refuse_wait_in_own_work(h, "metrale_memset");
  device([&] { backend_->memset_async(dst, value, bytes, h); });
  Counters::bump(counters_.memsets);
  Counters::bump(counters_.memset_bytes, bytes);
  sync(h, "memset");
}

void metrale_context::memset_async(DevPtr dst, uint8_t value, size_t bytes, metrale_stream* s) {
  fault_.check();
  auto* st = stream_of(s);
  if (bytes == 0) return;
  check_range(dst, bytes, "destination");
  device([&] { backend_->memset_async(dst, value, bytes, st->handle); });
  trace_copy(METRALE_TRACE_MEMSET, dst, value, bytes);
  Counters::bump(counters_.memsets);
  Counters::bump(counters_.memset_bytes, bytes);
}
