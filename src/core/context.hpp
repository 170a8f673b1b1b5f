// The object behind metrale_context_t: the backend plus everything core
// keeps above it. One file per area implements its methods (memory.cpp,
// copy.cpp, redzone.cpp, streams.cpp, launch.cpp, ...).
//
// Handles: a metrale_context_t* a caller holds is a handle value, not the
// address of this object (api::live() maps it here; never dereference the
// caller's value). Likewise the metrale_stream*, metrale_event*,
// metrale_graph* and metrale_kernel* parameters below are the caller's
// handle values: stream_of() and friends map them to the objects in this
// context's tables, or refuse them.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/bounds.hpp"
#include "core/context_registry.hpp"
#include "core/fault_latch.hpp"
#include "core/handles.hpp"
#include "core/intern.hpp"
#include "core/kernel_timer.hpp"
#include "core/ledger.hpp"
#include "core/modules.hpp"
#include "core/pinned_registry.hpp"
#include "core/scan_fence.hpp"
#include "core/staging/stager.hpp"
#include "core/telemetry.hpp"
#include "metrale_gpu.h"

namespace metrale::core {
using backend::Dim3;
using backend::EventHandle;
using backend::StreamHandle;
}  // namespace metrale::core

struct metrale_context {
  using DevPtr = uint64_t;
  using StreamHandle = metrale::backend::StreamHandle;
  using EventHandle = metrale::backend::EventHandle;

  // --- context (context.cpp) ---
  // Creates and registers a context; returns its handle value.
  static metrale_context_t* create(const metrale_context_options_t* opts);
  // Frees everything, errors ignored; deletes this. The caller has already
  // taken the handle out of the registry (core::take_context).
  void destroy() noexcept;
  // INVALID_ARGUMENT when this thread may not destroy the context now: it is
  // inside the log callback, or inside a host kernel of this context
  // (reentry.cpp). The api calls it before destroy().
  void refuse_destroy_from_inside();
  metrale_backend_t backend_kind() const { return backend_->kind(); }
  void bind_thread();
  // Throws CONTEXT_LOST naming the first fault; returns while healthy.
  void fault_status() const { fault_.check(); }
  void device_info(metrale_device_info_t* info);
  size_t total_memory();
  size_t free_memory();
  size_t device_free_memory();

  // --- memory (memory.cpp) ---
  DevPtr alloc(size_t bytes, const char* file, int line, metrale_alloc_kind_t kind);
  void free(DevPtr ptr);
  DevPtr alloc_arena(size_t bytes);
  void free_arena(DevPtr ptr);
  void* host_alloc_pinned(size_t bytes);
  void host_free_pinned(void* ptr);
  void host_register(void* ptr, size_t bytes);
  void host_unregister(void* ptr);
  bool host_is_pinned(const void* ptr, size_t bytes) const;
  DevPtr host_device_pointer(void* ptr);

  // --- ledger queries (ledger_queries.cpp) ---
  size_t live_bytes() const { return ledger_.live_bytes(); }
  size_t live_count() const { return ledger_.live_count(); }
  size_t slack_bytes() const { return ledger_.slack_bytes(); }
  void live_allocations(metrale_allocation_t* out, size_t cap, size_t* count) const;
  void alloc_report(size_t top_n, size_t min_mib, char* buf, size_t buflen, size_t* needed) const;
  // metrale_sweep_unreleased: CONTEXT_LOST once lost; destroy uses sweep().
  size_t sweep_unreleased() {
    fault_.check();
    return sweep();
  }
  size_t sweep();

  // --- red zones (redzone.cpp) ---
  void redzone_scan(metrale_redzone_violation_t* out, size_t cap, size_t* count);
  void redzone_poison(uint64_t lo, uint64_t hi);

  // --- copies (copy.cpp) ---
  void copy_h2d(const void* src, size_t bytes, DevPtr dst);
  void copy_d2h(DevPtr src, void* dst, size_t bytes);
  void copy_d2h_on_stream(DevPtr src, void* dst, size_t bytes, metrale_stream* s);
  void copy_d2h_async(DevPtr src, void* dst, size_t bytes, metrale_stream* s);
  void copy_d2d(DevPtr src, DevPtr dst, size_t bytes);
  void copy_h2d_async(const void* src, size_t bytes, DevPtr dst, metrale_stream* s);
  void copy_h2d_async_retained(const void* src, size_t bytes, DevPtr dst, metrale_stream* s);
  void copy_d2d_async(DevPtr src, DevPtr dst, size_t bytes, metrale_stream* s);
  void copy_2d_async(DevPtr src, size_t src_pitch, DevPtr dst, size_t dst_pitch,
                     size_t width, size_t height, metrale_stream* s);
  void memset(DevPtr dst, uint8_t value, size_t bytes);
  void memset_async(DevPtr dst, uint8_t value, size_t bytes, metrale_stream* s);

  // --- modules and launches (module_ops.cpp, launch.cpp) ---
  void module_load_data(const char* name, const void* image, size_t size);
  void module_load_file(const char* name, const char* path);
  void module_unload(const char* name);
  bool has_module(const char* name) const;
  metrale_kernel* kernel_get(const char* module, const char* func, const char* file, int line);
  void register_host(const char* module, const char* func, metrale_host_kernel_fn fn,
                     void* user, const size_t* param_sizes, size_t nparams);
  void launch(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block, uint32_t shared,
              metrale_stream* s, void** params);
  void launch_packed(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                     uint32_t shared, metrale_stream* s, const void* args, size_t args_bytes);

  // --- streams, events, graphs (streams.cpp, events.cpp, graphs.cpp) ---
  metrale_stream* stream_create();
  void stream_destroy(metrale_stream* s);
  void stream_synchronize(metrale_stream* s);
  // The default stream's handle value.
  metrale_stream* default_stream() { return default_stream_id_; }
  bool stream_is_capturing(metrale_stream* s);
  metrale_event* event_create(unsigned flags);
  void event_record(metrale_event* e, metrale_stream* s);
  void event_synchronize(metrale_event* e);
  bool event_query(metrale_event* e);
  void event_destroy(metrale_event* e);
  void stream_wait_event(metrale_stream* s, metrale_event* e);
  float event_elapsed_ms(metrale_event* start, metrale_event* end);
  void graph_begin_capture(metrale_stream* s);
  metrale_graph* graph_end_capture(metrale_stream* s);
  void graph_abort_capture(metrale_stream* s);
  void graph_launch(metrale_graph* g, metrale_stream* s);
  void graph_destroy(metrale_graph* g);

  // --- telemetry (telemetry_ops.cpp) ---
  void counters(metrale_counters_t* c) const { counters_.snapshot(c); }
  void counters_reset() { counters_.reset(); }
  void launch_trace_enable(bool on);
  void launch_trace_read(metrale_trace_entry_t* out, size_t cap, size_t* count) const;
  void kernel_audit_read(metrale_kernel_audit_entry_t* out, size_t cap, size_t* count) const;
  void kernel_timing_enable(bool on) { kernel_timing_.store(on); }
  void kernel_timings_read(metrale_kernel_timing_t* out, size_t cap, size_t* count);

 private:
  explicit metrale_context(const metrale_context_options_t& opts);

  // Handle checks: the object behind a caller's handle value. NULL stream =
  // default; a destroyed handle, another context's or another kind's, or a
  // value no table issued is INVALID_ARGUMENT (a kernel of an unloaded
  // module: NOT_FOUND). Inline: a lookup is a few instructions.
  metrale::core::StreamObj* stream_of(metrale_stream* s) const {
    if (s == nullptr) return default_stream_;
    if (auto* o = streams_.find(metrale::core::handle_id::value_of(s))) return o;
    refuse_handle("stream", s);
  }
  metrale::core::EventObj* event_of(metrale_event* e, const char* what) const {
    if (auto* o = events_.find(metrale::core::handle_id::value_of(e))) return o;
    refuse_handle(what, e);
  }
  metrale::core::GraphObj* graph_of(metrale_graph* g) const {
    if (auto* o = graphs_.find(metrale::core::handle_id::value_of(g))) return o;
    refuse_handle("graph", g);
  }
  metrale::core::KernelObj* kernel_of(metrale_kernel* k) const {
    metrale::core::KernelObj* o = modules_->find(k);
    if (o == nullptr || o->stale.load(std::memory_order_acquire)) refuse_kernel(k, o);
    return o;
  }
  [[noreturn, gnu::cold, gnu::noinline]] static void refuse_handle(const char* what,
                                                                   const void* h);
  [[noreturn, gnu::cold, gnu::noinline]] static void refuse_kernel(
      const metrale_kernel* k, const metrale::core::KernelObj* o);

  // Runs a backend call: CONTEXT_LOST from it latches the context.
  template <class F>
  decltype(auto) device(F&& f) {
    try {
      return f();
    } catch (const metrale::Error& e) {
      if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
      throw;
    }
  }
  // A DRIVER error from a launch or a sync: a non-empty probe latches and
  // turns it into CONTEXT_LOST with `what` in front.
  [[noreturn]] void fail_after_probe(const metrale::Error& e, const std::string& what);
  // backend stream_synchronize, counted, faults probed.
  void sync(StreamHandle h, const char* what);
  void settle_streams_before_scan();
  // Host kernels calling back in (reentry.cpp): INVALID_ARGUMENT when this
  // thread runs work of stream h (a wait on h would wait for the kernel
  // itself), of any stream of this context, or of stream h being destroyed.
  void refuse_wait_in_own_work(StreamHandle h, const char* what);
  void refuse_in_any_work(const char* what);
  void refuse_stream_destroy_in_own_work(StreamHandle h);
  void check_range(DevPtr p, size_t bytes, const char* what) const;
  // Capture checks (copy.cpp; streams.cpp uses them too): done before
  // anything is enqueued.
  bool capturing(metrale::core::StreamObj* st);
  void refuse_if_capturing(metrale::core::StreamObj* st, const char* what);
  // Enqueue, then count (and trace d2d); nothing counted when it throws.
  void enqueue_h2d(const void* src, size_t bytes, DevPtr dst, metrale::core::StreamObj* st, bool snapshot);
  void enqueue_d2h(DevPtr src, void* dst, size_t bytes, metrale::core::StreamObj* st);
  void enqueue_d2d(DevPtr src, DevPtr dst, size_t bytes, metrale::core::StreamObj* st);
  // Pinned staging of a large pageable copy (copy.cpp, core/staging): true
  // when it was staged and counted; false, nothing done, for a direct copy.
  bool stage_h2d(const void* src, size_t bytes, DevPtr dst, metrale::core::StreamObj* st);
  bool stage_d2h(DevPtr src, void* dst, size_t bytes, metrale::core::StreamObj* st);
  void trace_copy(metrale_trace_kind_t kind, uint64_t a, uint64_t b, uint64_t c);
  void fill_pads(const std::vector<metrale::backend::Range>& pads);
  void launch_common(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                     uint32_t shared, metrale_stream* s, void** params, const void* args,
                     size_t args_bytes, bool packed);
  metrale_trace_entry_t trace_launch(const metrale::core::KernelObj* k, metrale_dim3_t grid,
                                     metrale_dim3_t block, uint32_t shared, void** params,
                                     const void* args, size_t args_bytes, bool packed);
  // The backend free of a block already off the ledger, held back while a
  // red-zone pass may still read its pad (see ScanFence).
  void release_memory(DevPtr ptr, const metrale::core::LedgerEntry& e);
  // Frees what a closed red-zone pass held back; errors are logged.
  void free_held(const std::vector<DevPtr>& held) noexcept;
  // Starts timing a launch on st: true with *start recorded, false when the
  // timing is dropped (caps of KernelTimer; counted in timings_dropped).
  bool begin_timing(metrale::core::KernelObj* kern, metrale::core::StreamObj* st, size_t* row, EventHandle* start);
  void release_everything() noexcept;

  metrale_context_options_t opts_;
  std::unique_ptr<metrale::backend::Backend> backend_;
  metrale::core::FaultLatch fault_;
  metrale::core::InternTable strings_;
  metrale::core::Ledger ledger_;
  std::atomic<uint64_t> seq_{0};    // red-zone index: metrale_alloc calls only
  std::atomic<uint64_t> order_{0};  // creation order of every ledger entry
  std::unique_ptr<metrale::core::BoundsIndex> bounds_;  // checked pointers only
  metrale::core::PinnedRegistry pinned_;
  std::mutex arenas_mutex_;
  std::unordered_map<DevPtr, size_t> arenas_;
  std::unique_ptr<metrale::core::Modules> modules_;
  metrale::core::SlotTable<metrale::core::StreamObj> streams_{"stream"};
  metrale::core::SlotTable<metrale::core::EventObj> events_{"event"};
  metrale::core::SlotTable<metrale::core::GraphObj> graphs_{"graph"};
  metrale::core::StreamObj* default_stream_ = nullptr;  // the object
  metrale_stream* default_stream_id_ = nullptr;         // its handle value

  metrale::core::Counters counters_;
  std::atomic<bool> trace_on_{false};
  metrale::core::Ring<metrale_trace_entry_t> trace_;
  metrale::core::Ring<metrale_kernel_audit_entry_t> audit_;
  std::atomic<bool> kernel_timing_{false};
  metrale::core::KernelTimer timer_;
  metrale::core::ScanFence scan_fence_;
  std::atomic<bool> warned_pinned_source_{false};
  metrale::core::staging::Stager staging_{opts_};  // released in release_everything
};

namespace metrale::core {
using Context = ::metrale_context;
}  // namespace metrale::core
