// What a staged copy needs from a backend, and nothing more: pinned buffers,
// async copies and events on the copy's stream. Narrow on purpose, so that
// tests can run the pipeline over a fake whose DMA really happens later (the
// host backend runs every copy at enqueue and would hide a missing wait).
#pragma once

#include <cstddef>

#include "backend/backend.hpp"

namespace metrale::core::staging {

using backend::DevPtr;
using backend::EventHandle;
using backend::StreamHandle;

class StagingDevice {
 public:
  virtual ~StagingDevice() = default;
  // Page-locked host memory; throws (OUT_OF_MEMORY, DRIVER) when there is none.
  virtual void* alloc_pinned(size_t bytes) = 0;
  virtual void free_pinned(void* p) = 0;
  virtual EventHandle event_create() = 0;  // no timing
  virtual void event_destroy(EventHandle e) = 0;
  virtual void event_record(EventHandle e, StreamHandle s) = 0;
  virtual void event_synchronize(EventHandle e) = 0;
  // Enqueued on s, never waited for; src/dst here are pinned staging memory.
  virtual void h2d(DevPtr dst, const void* src, size_t bytes, StreamHandle s) = 0;
  virtual void d2h(void* dst, DevPtr src, size_t bytes, StreamHandle s) = 0;
};

// The real thing: forwards to the context's backend.
class BackendDevice final : public StagingDevice {
 public:
  explicit BackendDevice(backend::Backend& b) : b_(b) {}
  void* alloc_pinned(size_t bytes) override { return b_.host_alloc_pinned(bytes); }
  void free_pinned(void* p) override { b_.host_free_pinned(p); }
  EventHandle event_create() override { return b_.event_create(false); }
  void event_destroy(EventHandle e) override { b_.event_destroy(e); }
  void event_record(EventHandle e, StreamHandle s) override { b_.event_record(e, s); }
  void event_synchronize(EventHandle e) override { b_.event_synchronize(e); }
  void h2d(DevPtr dst, const void* src, size_t bytes, StreamHandle s) override {
    b_.copy_h2d_async(dst, src, bytes, s);
  }
  void d2h(void* dst, DevPtr src, size_t bytes, StreamHandle s) override {
    b_.copy_d2h_async(dst, src, bytes, s);
  }

 private:
  backend::Backend& b_;
};

}  // namespace metrale::core::staging
