// A Backend for core tests of the NVTX annotation hooks: mem_alloc hands out
// addresses from a counter (nothing touches the memory), events complete at
// once, and every call that matters here appends a line to a log:
// "alloc <ptr> <bytes>", "free <ptr>", "chunk <ptr> <bytes>",
// "chunk_release <ptr>", "block <ptr> <bytes>", "block_release <ptr>".
// Everything else throws UNSUPPORTED. Thread-safe.
#pragma once

#include <cstdio>
#include <mutex>
#include <string>
#include <vector>

#include "backend/backend.hpp"

namespace nvtxtest {

using namespace metrale::backend;

class AnnotationBackend final : public Backend {
 public:
  std::vector<std::string> log() {
    std::lock_guard<std::mutex> lock(mu_);
    return log_;
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    log_.clear();
  }

  // While set, mem_alloc throws OUT_OF_MEMORY (logging nothing).
  bool out_of_memory = false;

  metrale_backend_t kind() const override { return METRALE_BACKEND_HOST; }
  DevPtr mem_alloc(size_t bytes, size_t* reserved) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (out_of_memory) metrale::fail(METRALE_ERROR_OUT_OF_MEMORY, "test: out of memory");
    const DevPtr p = next_;
    next_ += (bytes + 0xFFFFF) & ~DevPtr{0xFFFFF};  // 1 MiB apart, like a driver
    *reserved = bytes;
    add("alloc", p, bytes);
    return p;
  }
  void mem_free(DevPtr ptr) override { note("free", ptr); }
  bool mem_annotations_begin(Annotations) override { return true; }
  void mem_annotate_chunk(DevPtr ptr, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    add("chunk", ptr, bytes);
  }
  void mem_annotate_chunk_release(DevPtr ptr) noexcept override { note("chunk_release", ptr); }
  void mem_annotate_block(DevPtr ptr, size_t bytes) noexcept override {
    std::lock_guard<std::mutex> lock(mu_);
    add("block", ptr, bytes);
  }
  void mem_annotate_block_release(DevPtr ptr) noexcept override { note("block_release", ptr); }

  EventHandle event_create(bool) override { return ++events_; }
  void event_destroy(EventHandle) override {}
  void event_record(EventHandle, StreamHandle) override {}
  void event_synchronize(EventHandle) override {}
  bool event_query(EventHandle) override { return true; }
  bool stream_is_capturing(StreamHandle) override { return false; }

  // --- not used by these tests ---
  [[noreturn]] static void no() {
    metrale::fail(METRALE_ERROR_UNSUPPORTED, "not in the annotation test backend");
  }
  DeviceInfo device_info() override { no(); }
  void mem_info(size_t*, size_t*) override { no(); }
  void bind_thread() override {}
  DevPtr mem_alloc_managed(size_t, size_t*) override { no(); }
  void* host_alloc_pinned(size_t) override { no(); }
  void host_free_pinned(void*) override { no(); }
  void host_register(void*, size_t) override { no(); }
  void host_unregister(void*) override { no(); }
  DevPtr host_device_pointer(void*) override { no(); }
  bool host_range_pinned(const void*, size_t) override { no(); }
  void copy_h2d_async(DevPtr, const void*, size_t, StreamHandle) override { no(); }
  void copy_h2d_snapshot_async(DevPtr, const void*, size_t, StreamHandle) override { no(); }
  void copy_d2h_async(void*, DevPtr, size_t, StreamHandle) override { no(); }
  void copy_d2d_async(DevPtr, DevPtr, size_t, StreamHandle) override { no(); }
  void copy_2d_async(DevPtr, size_t, DevPtr, size_t, size_t, size_t, StreamHandle) override {
    no();
  }
  void memset_async(DevPtr, uint8_t, size_t, StreamHandle) override { no(); }
  void pattern_fill(const Range*, size_t, uint8_t) override { no(); }
  void pattern_count(const Range*, size_t, uint8_t, uint32_t*) override { no(); }
  StreamHandle stream_create() override { no(); }
  void stream_destroy(StreamHandle) override { no(); }
  void stream_synchronize(StreamHandle) override { no(); }
  float event_elapsed_ms(EventHandle, EventHandle) override { no(); }
  void stream_wait_event(StreamHandle, EventHandle) override { no(); }
  void capture_begin(StreamHandle) override { no(); }
  GraphHandle capture_end(StreamHandle) override { no(); }
  void capture_abort(StreamHandle) override { no(); }
  void graph_launch(GraphHandle, StreamHandle) override { no(); }
  void graph_destroy(GraphHandle) override { no(); }
  ModuleHandle module_load(const void*, size_t) override { no(); }
  void module_unload(ModuleHandle) override { no(); }
  FuncHandle module_function(ModuleHandle, const char*) override { no(); }
  ModuleHandle host_module_add(ModuleHandle, const char*, metrale_host_kernel_fn, void*,
                               const ParamInfo*, size_t) override {
    no();
  }
  bool function_params(FuncHandle, std::vector<ParamInfo>*) override { no(); }
  void launch(FuncHandle, Dim3, Dim3, uint32_t, StreamHandle, void**) override { no(); }
  void launch_packed(FuncHandle, Dim3, Dim3, uint32_t, StreamHandle, const void*,
                     size_t) override {
    no();
  }
  std::string probe_fault() override { return ""; }

 private:
  void add(const char* what, DevPtr p, size_t bytes) {
    char line[96];
    std::snprintf(line, sizeof line, "%s %#llx %zu", what, (unsigned long long)p, bytes);
    log_.push_back(line);
  }
  void note(const char* what, DevPtr p) {
    std::lock_guard<std::mutex> lock(mu_);
    char line[96];
    std::snprintf(line, sizeof line, "%s %#llx", what, (unsigned long long)p);
    log_.push_back(line);
  }

  std::mutex mu_;
  std::vector<std::string> log_;
  DevPtr next_ = 0x7f0000000000ull;
  EventHandle events_ = 0;
};

}  // namespace nvtxtest
