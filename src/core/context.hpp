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
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/bounds.hpp"
#include "core/context_registry.hpp"
#include "core/event_log.hpp"
#include "core/fault_latch.hpp"
#include "core/handle_graveyard.hpp"
#include "core/handles.hpp"
#include "core/intern.hpp"
#include "core/kernel_timer.hpp"
#include "core/ledger.hpp"
#include "core/modules.hpp"
#include "core/pad_mirror.hpp"
#include "core/owner_log.hpp"
#include "core/pad_verify_queue.hpp"
#include "core/pinned_cache.hpp"
#include "core/pinned_registry.hpp"
#include "core/quarantine.hpp"
#include "core/pool/backend_chunk_source.hpp"
#include "core/pool/caching_pool.hpp"
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
  // s: the stream the memory is ordered on (NULL: the default stream);
  // only pooled device memory is stream-ordered.
  // The event log's front (event_log_ops.cpp): one branch while no log is open.
  DevPtr alloc(size_t bytes, const char* file, int line, metrale_alloc_kind_t kind,
               metrale_stream* s = nullptr, bool wait_for_fill = true) {
    if (!event_log_.on()) {
      // The common pooled case (pool_fast_path.cpp) without the general
      // path's checks; alloc_unlogged ends there too when they pass.
      if (s == nullptr && kind == METRALE_ALLOC_DEVICE && fast_alloc_ && pooled_fast()) {
        return alloc_pooled(bytes, kind, default_stream_, file != nullptr ? file : "<unknown>",
                            line);
      }
      // Red zones on: alloc_unlogged's own dispatch, without its checks.
      if (s == nullptr && kind == METRALE_ALLOC_DEVICE && fast_alloc_padded_ && pooled_fast()) {
        return alloc_pooled_padded(bytes, kind, default_stream_,
                                   file != nullptr ? file : "<unknown>", line, wait_for_fill);
      }
      return alloc_unlogged(bytes, file, line, kind, s, wait_for_fill);
    }
    return alloc_logged(bytes, file, line, kind, s, wait_for_fill);
  }
  // tk: the event log's number for this alloc, taken under the ledger's
  // lock right before its entry appears (the general path then), so that a
  // free or sweep that finds the entry is numbered after it.
  DevPtr alloc_unlogged(size_t bytes, const char* file, int line, metrale_alloc_kind_t kind,
                        metrale_stream* s, bool wait_for_fill,
                        metrale::core::EventLog::Ticket* tk = nullptr);
  void free(DevPtr ptr, const char* file = nullptr, int line = 0);

  // --- the caching pool (pool_ops.cpp) ---
  // metrale_free_async: frees ptr on s (pooled), or as free() (raw).
  void free_on(DevPtr ptr, metrale_stream* s, const char* file, int line);
  void record_stream(DevPtr ptr, metrale_stream* s);
  void pool_stats(metrale_pool_stats_t* out) const;
  size_t pool_trim(size_t keep_bytes);
  bool pooled() const { return pool_ != nullptr; }
  DevPtr alloc_arena(size_t bytes);
  void free_arena(DevPtr ptr);
  void* host_alloc_pinned(size_t bytes);
  void host_free_pinned(void* ptr);
  void host_register(void* ptr, size_t bytes);
  void host_unregister(void* ptr);
  bool host_is_pinned(const void* ptr, size_t bytes) const;
  DevPtr host_device_pointer(void* ptr);
  // Frees cached pinned blocks, oldest first, until at most keep_bytes stay
  // cached (pinned_memory.cpp); returns the bytes given back to the backend
  // (a block whose free fails is dropped, logged, not counted). Live blocks
  // are untouched. Logs a debug line when it freed any. Thread-safe; no
  // fault check (teardown uses it).
  size_t pinned_pool_trim(size_t keep_bytes);
  // Hits, misses, cached bytes and blocks of the pinned pool. Thread-safe.
  metrale::core::PinnedCache::Stats pinned_pool_stats() const { return pinned_cache_.stats(); }

  // --- the event log (event_log_ops.cpp, core/event_log.hpp) ---
  // handle: this context's handle value (the log names it).
  void event_log_open(const char* path, uint64_t handle);
  void event_log_close() { event_log_.close(); }
  void event_log_flush() { event_log_.flush(); }

  // --- ledger queries (ledger_queries.cpp) ---
  size_t live_bytes() const { return ledger_.live_bytes(); }
  size_t live_count() const { return ledger_.live_count(); }
  size_t slack_bytes() const { return ledger_.slack_bytes(); }
  void live_allocations(metrale_allocation_t* out, size_t cap, size_t* count) const;
  void alloc_report(size_t top_n, size_t min_mib, char* buf, size_t buflen, size_t* needed) const;
  // Tags (tag_queries.cpp): the report grouped by tag, and one entry's tag.
  void alloc_report_by_tag(size_t top_n, size_t min_mib, char* buf, size_t buflen,
                           size_t* needed) const;
  const char* allocation_tag(DevPtr ptr) const;
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
  // param_sizes == nullptr: the parameters are unknown; param_aligns ==
  // nullptr: each alignment is inferred from the size (the sizes-only call).
  void register_host(const char* module, const char* func, metrale_host_kernel_fn fn,
                     void* user, const size_t* param_sizes, const size_t* param_aligns,
                     size_t nparams);
  void launch(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block, uint32_t shared,
              metrale_stream* s, void** params);
  void launch_packed(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                     uint32_t shared, metrale_stream* s, const void* args, size_t args_bytes);
  // The packing rule's checks (launch_layout.cpp): a packed launch with the
  // caller's offsets and sizes, and the kernel's own layout as known.
  void launch_packed_layout(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                            uint32_t shared, metrale_stream* s, const void* args,
                            size_t args_bytes, const size_t* offsets, const size_t* sizes,
                            size_t nparams);
  void kernel_param_layout(metrale_kernel* k, size_t* offsets, size_t* sizes, size_t cap,
                           size_t* count);
  uint64_t kernel_native(metrale_kernel* k) const;

  // --- streams, events, graphs (streams.cpp, events.cpp, graphs.cpp) ---
  metrale_stream* stream_create();
  // metrale_stream_wrap (stream_wrap.cpp): the handle standing for a native
  // stream; a second wrap of the same native value returns the same handle
  // and counts one more stream_destroy before the handle dies.
  metrale_stream* stream_wrap(uint64_t native);
  void stream_destroy(metrale_stream* s);
  void stream_synchronize(metrale_stream* s);
  // The default stream's handle value.
  metrale_stream* default_stream() { return default_stream_id_; }
  // Defined inline in core/stream_query.hpp, which its caller (the API
  // shim) includes: the query's own cost is a few ns.
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

  // --- several devices (peer_ops.cpp) ---
  // The device ordinal this context runs on (opts.device / METRALE_DEVICE).
  int device_ordinal() const { return opts_.device; }
  std::vector<metrale::core::SiteUsage> ledger_sites() const { return ledger_.sites_by_bytes(); }
  // Whether this context's device can reach peer's memory directly; "" when
  // it can, else why not. enable: UNSUPPORTED naming why when refused.
  std::string peer_refusal(metrale_context& peer);
  void peer_access_enable(metrale_context& peer);
  // Copies from this context's src to dst of dst_ctx: on this context's
  // default stream, waited for (copy_peer), or on s (copy_peer_async).
  void copy_peer(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes);
  void copy_peer_async(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes,
                       metrale_stream* s);
  // The backend's own stream behind s (metrale_stream_native).
  uint64_t stream_native(metrale_stream* s);

  // --- telemetry (telemetry_ops.cpp) ---
  void counters(metrale_counters_t* c) const { counters_.snapshot(c); }
  void counters_reset() {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());  // see count_alloc_held
    counters_.reset();
  }
  void launch_trace_enable(bool on);
  void launch_trace_read(metrale_trace_entry_t* out, size_t cap, size_t* count) const;
  void kernel_audit_read(metrale_kernel_audit_entry_t* out, size_t cap, size_t* count) const;
  void kernel_timing_enable(bool on) {
    watch(kWatchTiming, on);
  }
  void kernel_timings_read(metrale_kernel_timing_t* out, size_t cap, size_t* count);

 private:
  explicit metrale_context(const metrale_context_options_t& opts);

  // Event-log hooks: one branch while no log is open; the slow halves take
  // the pool's stats (and so the ledger's lock): never call them with it held.
  DevPtr alloc_logged(size_t bytes, const char* file, int line, metrale_alloc_kind_t kind,
                      metrale_stream* s, bool wait_for_fill);
  // Ledger::take with the event log's number taken under the same lock.
  bool take_entry(DevPtr ptr, metrale::core::LedgerEntry* e,
                  metrale::core::EventLog::Ticket* tk) {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    if (!ledger_.take_locked(ptr, e)) return false;
    *tk = event_log_.ticket();
    return true;
  }
  void log_free(metrale::core::EventLog::Ticket tk, const metrale::core::LedgerEntry& e,
                DevPtr ptr, const metrale::core::StreamObj* st, const char* file, int line,
                bool sweep = false) {
    if (event_log_.on()) log_free_slow(tk, e, ptr, st, file, line, sweep);
  }
  void log_free_slow(metrale::core::EventLog::Ticket tk, const metrale::core::LedgerEntry& e,
                     DevPtr ptr, const metrale::core::StreamObj* st, const char* file, int line,
                     bool sweep);
  template <class Found>
  void log_scan(const std::vector<Found>& found) {
    if (event_log_.on()) log_scan_slow(found);
  }
  // The same once the scan has committed: a line lost for want of memory
  // is the event log's loss, not the scan's failure.
  template <class Found>
  void log_scan_quietly(const std::vector<Found>& found) noexcept {
    try {
      log_scan(found);
    } catch (...) {
      // Lost: the scan's result stands.
    }
  }
  void log_scan_slow(const std::vector<metrale_redzone_violation_t>& found);
  void log_scan_slow(const std::vector<metrale_use_after_free_t>& found);
  metrale::core::EventPoolState event_pool_state() const;
  metrale::core::EventLogHeader event_header(uint64_t handle) const;
  static uint64_t event_stream(const metrale::core::StreamObj* st);

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
  // The same, not counted: a scan counts its waits once it cannot fail.
  void sync_uncounted(StreamHandle h, const char* what);
  // Waits for the work of every stream not capturing; returns how many it
  // waited for, which the caller counts (stream_syncs) once it cannot fail.
  size_t settle_streams_before_scan();
  // A pad the red-zone pass found with bytes other than the pattern: its
  // range and owner at the snapshot, and the bad bytes the device counted.
  struct DirtyPad {
    metrale::backend::Range zone;
    metrale::core::PadOwner owner;
    uint32_t bad_bytes;
  };
  std::vector<DirtyPad> find_dirty_pads();  // redzone.cpp; inside a ScanPass
  size_t find_scan_violations(std::vector<metrale_redzone_violation_t>* found,
                            std::vector<uint64_t>* live_reported);  // redzone.cpp
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
  void enqueue_peer(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes,
                    metrale::core::StreamObj* st);  // peer_ops.cpp
  void check_peer_ranges(DevPtr src, metrale_context& dst_ctx, DevPtr dst, size_t bytes) const;
  // Pinned staging of a large pageable copy (copy.cpp, core/staging): true
  // when it was staged and counted; false, nothing done, for a direct copy.
  bool stage_h2d(const void* src, size_t bytes, DevPtr dst, metrale::core::StreamObj* st);
  bool stage_d2h(DevPtr src, void* dst, size_t bytes, metrale::core::StreamObj* st);
  void trace_copy(metrale_trace_kind_t kind, uint64_t a, uint64_t b, uint64_t c);
  void fill_pads(const std::vector<metrale::backend::Range>& pads);
  // launch and launch_packed's body (launch.cpp only: inlined there).
  void launch_common(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                     uint32_t shared, metrale_stream* s, void** params, const void* args,
                     size_t args_bytes, bool packed);
  // Launch path (launch.cpp): argument checks, the full path taken when the
  // trace, timing or debug_sync is on, and the failure message.
  void check_launch_args(const metrale::core::KernelObj* kern, void** params, const void* args,
                         size_t args_bytes, bool packed);
  [[noreturn, gnu::cold, gnu::noinline]] void refuse_launch_args(
      const metrale::core::KernelObj* kern, const void* args, size_t args_bytes, bool packed);
  [[noreturn, gnu::cold, gnu::noinline]] void fail_launch(const metrale::core::KernelObj* kern,
                                                          const metrale::Error& e);
  // The backend's launch, its failure named by fail_launch (launch.cpp only).
  void launch_on_backend(const metrale::core::KernelObj* kern, metrale_dim3_t grid,
                         metrale_dim3_t block, uint32_t shared, metrale::core::StreamObj* st,
                         void** params, const void* args, size_t args_bytes, bool packed);
  void launch_observed(metrale::core::KernelObj* kern, metrale_dim3_t grid, metrale_dim3_t block,
                       uint32_t shared, metrale::core::StreamObj* st, void** params,
                       const void* args, size_t args_bytes, bool packed);
  metrale_trace_entry_t trace_launch(const metrale::core::KernelObj* k, metrale_dim3_t grid,
                                     metrale_dim3_t block, uint32_t shared, void** params,
                                     const void* args, size_t args_bytes, bool packed);
  // The free of a block already off the ledger (to the pool on `on`, or the
  // backend), held back while a red-zone pass may still read its pad (see
  // ScanFence). on == 0: the block's own stream.
  // A padded pooled block goes to the red-zone check first (hold_for_verify);
  // file/line: the free's site, for its report.
  void release_memory(DevPtr ptr, const metrale::core::LedgerEntry& e, StreamHandle on = 0,
                      const char* file = nullptr, int line = 0);
  // Frees what a closed red-zone pass held back; errors are logged.
  void free_held(const std::vector<metrale::core::ScanFence::Released>& held) noexcept;
  // The shared body of free() and free_on(): st == nullptr frees on the
  // block's own stream.
  void free_impl(DevPtr ptr, metrale::core::StreamObj* st, const char* file, int line);
  // The pool's or the driver's free, now (no ScanFence check).
  void release_now(DevPtr ptr, const metrale::core::LedgerEntry& e, StreamHandle on);
  // --- the freed-memory quarantine (quarantine_ops.cpp) ---
  // Fills and holds a block just taken off the ledger; releases what the
  // budget pushes out. Out of memory before the fill: frees it as
  // release_memory does, unquarantined. Throws (nothing held, nothing
  // filled) when that free or the fill fails otherwise.
  void quarantine_block(DevPtr ptr, const metrale::core::LedgerEntry& e, StreamHandle on,
                        const char* file, int line);
  void release_quarantined(const metrale::core::QuarantineList& out) noexcept;
  // Events on the streams besides `fill` that may still use the block
  // (never waited for: a free does not block); q.filled false when any.
  void quarantine_waits(metrale::core::QuarantinedBlock* q);
  void record_quarantine_waits(metrale::core::QuarantinedBlock* q,
                               std::vector<StreamHandle> streams);
  // Whether q's waits have completed and its stream does not capture.
  bool waits_done(const metrale::core::QuarantinedBlock& q);
  // Fills q (not yet admitted) when waits_done.
  bool fill_if_done(metrale::core::QuarantinedBlock& q);
  void fill_quarantined(const metrale::core::QuarantinedBlock& q);
  // Fills the held blocks whose waits have completed; filled_on (may be
  // null) gets the streams those fills were queued on.
  void fill_waiting_quarantined(std::vector<StreamHandle>* filled_on) noexcept;
  bool quarantine_takes(const metrale::core::LedgerEntry& e) const {
    return quarantine_ && e.kind == METRALE_ALLOC_DEVICE && quarantine_->fits(e.bytes + e.pad);
  }
 public:
  void quarantine_scan(metrale_use_after_free_t* out, size_t cap, size_t* count);
  // Violations for metrale_redzone_scan (first_bad_offset from ptr).
  // Reports the quarantine's findings into *found; the seqs of its pads
  // found overwritten into *reported (the scan notes them once it cannot fail).
  // Returns the streams it waited for (uncounted).
  size_t quarantine_violations(std::vector<metrale_redzone_violation_t>* found,
                               std::vector<uint64_t>* reported);
  size_t quarantined_bytes() const { return quarantine_ ? quarantine_->bytes() : 0; }
 private:
  // Writes into quarantined buffers; with pads non-null also overwritten
  // pads of quarantined blocks (not reported before), for the red-zone scan.
  // Adds the streams it waited for to *waits, for the caller to count.
  std::vector<metrale_use_after_free_t> find_use_after_free(
      size_t* waits, std::vector<metrale_redzone_violation_t>* pads = nullptr);
  // At the destroy, before the quarantine empties: writes into quarantined
  // buffers logged at error level (and to the event log), as a scan would.
  void check_quarantine_at_destroy();
  static std::string use_after_free_text(const metrale_use_after_free_t& u);
  template <class ReadBack>
  void quarantined_pads(const std::vector<metrale::core::QuarantinedBlock>& held,
                        ReadBack& read_back, std::vector<uint8_t>* bytes,
                        std::vector<metrale_redzone_violation_t>* found);
  [[noreturn, gnu::cold]] void refuse_free(DevPtr ptr);
  // The alloc and free counters; ledger_.mutex() held (their only writers).
  void count_alloc_held(size_t bytes) {
    metrale::core::Counters::bump_held(counters_.allocs);
    metrale::core::Counters::bump_held(counters_.alloc_bytes, bytes);
  }
  void count_free_held(size_t bytes) {
    metrale::core::Counters::bump_held(counters_.frees);
    metrale::core::Counters::bump_held(counters_.free_bytes, bytes);
  }
  // The common pooled case (no red zones, no checked pointers, no capture):
  // seq, block and ledger entry under the ledger's lock (pool_fast_path.cpp).
  // free_pooled: the same for metrale_free of a live padless pooled block;
  // false, nothing done, for anything else (free_impl then does it all).
  // pooled_fast: what both need of the context that can change (healthy,
  // no capture open); fast_alloc_ / fast_free_ hold the fixed part.
  bool pooled_fast() const {
    return !fault_.lost() && captures_open_.load(std::memory_order_acquire) == 0;
  }
  bool free_pooled(DevPtr ptr, metrale::core::StreamObj* st, const char* file, int line);
  DevPtr alloc_pooled(size_t bytes, metrale_alloc_kind_t kind, metrale::core::StreamObj* st,
                      const char* file, int line);
  DevPtr alloc_pooled_retry(size_t bytes, metrale_alloc_kind_t kind,
                            metrale::core::StreamObj* st, const char* file, int line,
                            uint64_t seq);
  // The ledger entry of a pooled block, in place (lock held, r ready).
  void commit_pooled_held(metrale::core::pool::Block* b, size_t bytes, uint64_t seq,
                          metrale::core::Ledger::Ready r, metrale_alloc_kind_t kind);
  [[gnu::cold]] std::string oom_message(size_t bytes, const char* file, int line, bool managed,
                                        bool pooled, const metrale::Error& e);
  // Captures opened through this context's API and not yet ended: while 0,
  // the pool's paths skip the driver's capture query (one call per op).
  bool maybe_capturing(metrale::core::StreamObj* st) {
    return captures_open_.load(std::memory_order_acquire) != 0 && capturing(st);
  }
  void note_capture_closed(metrale::core::StreamObj* st) noexcept;
  // A pooled block freed while its stream captures: off the ledger at once,
  // back in the pool (on `on`) when that stream's capture closes.
  struct DeferredFree {
    DevPtr ptr;
    metrale::core::LedgerEntry entry;
    StreamHandle stream;  // freed on
    StreamHandle until;   // released when this stream's capture closes
    const char* free_file = nullptr;  // the free's site (the ledger's copy), for reports
    int free_line = 0;
    // Its release failed (short of memory): tried again at every later
    // release_deferred, once per call (retry_round names the last try).
    bool retry = false;
    uint64_t retry_round = 0;
  };
  void defer_free(DevPtr ptr, const metrale::core::LedgerEntry& e, StreamHandle on,
                  const char* file, int line);
  // Releases the frees waiting for h's capture (h = 0: only those whose
  // release failed before, short of memory, which every call tries again).
  void release_deferred(StreamHandle h) noexcept;
  void requeue_deferred(DeferredFree d, uint64_t round, const char* why) noexcept;
  void retarget_deferred(StreamHandle gone);  // `gone` is being destroyed
  // The end of a stream's destroy (stream_retire.cpp): the pool retires the
  // handle, then the backend destroys it (owns_backend). With red zones on
  // never beside a red-zone pass, which may still free blocks on it: under
  // verify_mutex_, or, from a destroy that must not wait for a pass (inside
  // a host kernel or a pass), queued for the mutex's holder to run.
  struct Retirement {
    StreamHandle handle;
    bool owns_backend;
  };
  void retire_stream_handle(Retirement r);
  // false: put off, the pool refused it (the stream's work waits for this
  // thread): nothing retired, the backend stream kept; queue it again.
  bool finish_retirement(const Retirement& r) noexcept;
  // Queues r for a later drain; false when there was no room and it was
  // finished (or put off for good) at once instead.
  bool queue_retirement(const Retirement& r) noexcept;
  // Freed blocks still naming `gone` (waiting for their pad check, in the
  // quarantine) move to the default stream once `gone`'s work is done.
  void hand_freed_blocks_to_heir(StreamHandle gone) noexcept;
  bool run_retirements_locked() noexcept;  // verify_mutex_ held; false: none finished
  // verify_mutex_ not held by this thread. then_wanted: afterwards, the pass
  // a free left while the mutex was held here (pass_wanted_), if any.
  void drain_retirements(bool then_wanted = true) noexcept;
  void run_wanted_pass() noexcept;  // the same alone
  static bool in_verify_pass() noexcept;   // pad_verify_ops.cpp
  // Marks this thread as running under verify_mutex_ (returns the old
  // mark): a log callback that calls back in then starts no pass and
  // queues a destroy's retirement instead of locking the mutex again.
  static bool mark_verify_pass(bool on) noexcept;
  std::mutex retire_mutex_;
  std::vector<Retirement> retire_later_;  // under retire_mutex_
  // Backend stream handles die under it (backend_release.cpp: taken with
  // try_lock, never waited for), and a scan's settle (stream_settle.cpp)
  // reads live streams' handles and queues its events on them under it: no
  // driver call sees a dead stream. Nothing waits for a stream holding it.
  std::mutex stream_handles_mutex_;
  std::vector<EventHandle> settle_events_;  // idle, under stream_handles_mutex_
  // Destroyed streams' and events' backend objects, kept a while so that a
  // call racing the destroy never hands the driver a dead one
  // (backend_release.cpp).
  metrale::core::HandleGraveyard stream_graveyard_, event_graveyard_;
  void release_stream_handle(StreamHandle h) noexcept;
  void release_event_handle(EventHandle h) noexcept;
  void destroy_backend_stream(StreamHandle h) noexcept;
  void release_buried_handles() noexcept;  // teardown: every one, now
  // A pooled block whose free (on `on`, or its own stream) or a
  // record_stream use would land in an open capture: that stream, else 0.
  // deferred_mutex_ held.
  StreamHandle capturing_user_held(const metrale::core::LedgerEntry& e, StreamHandle on);
  // For a free that cannot be refused (a sweep): queues it until that
  // capture closes, as a deferred free; false when none captures.
  bool defer_while_captured(DevPtr ptr, const metrale::core::LedgerEntry& e, const char* file);
  // Red-zone pad of a new pooled block: stream-ordered on st, or, while st
  // captures, filled at once and never recorded (rule 3).
  void fill_pooled_pad(DevPtr pad, size_t bytes, metrale::core::StreamObj* st, bool cap,
                       bool wait);
  // --- red zones on pooled blocks (pad_verify_ops.cpp, pad_verify_queue.hpp) ---
  // The pad of a new pooled block b (its first `bytes` the caller's): no
  // fill when b's checked pattern tail already covers it, else the whole
  // tail filled (the pad only while st captures); sets b->pattern_from.
  void prepare_pooled_pad(metrale::core::pool::Block* b, size_t bytes, size_t pad,
                          metrale::core::StreamObj* st, bool cap, bool wait);
  // A padded pooled block just off the ledger: queued for the batch check
  // (true), or false for anything else (the caller frees it as before).
  bool hold_for_verify(DevPtr ptr, const metrale::core::LedgerEntry& e, StreamHandle on,
                       const char* file, int line);
  // The padded pooled allocation in one lock (pad_fast_path.cpp): not
  // while st captures nor with checked pointers (alloc_unlogged's path).
  DevPtr alloc_pooled_padded(size_t bytes, metrale_alloc_kind_t kind,
                             metrale::core::StreamObj* st, const char* file, int line,
                             bool wait);
  // Its rest, out of line, when the lock's try handed out nothing: the
  // entry so far (seq, pad, site, tag), the block taken (nullptr: none; else
  // its pad needs a fill) and whether bytes + pad wraps (entry.kind: the
  // kind asked).
  DevPtr alloc_pooled_padded_miss(size_t bytes, metrale::core::StreamObj* st,
                                  const char* file, int line,
                                  bool wait, const metrale::core::LedgerEntry& entry,
                                  metrale::core::pool::Block* b, bool wraps);
  // With the ledger's lock held, a padded pooled block just taken off it
  // joins the check list: true when queued (*run_pass: a check is due, to
  // run once the lock is released), false (nothing changed) when it could
  // not be; st: the stream of a free_async, nullptr for the block's own.
  bool queue_freed_pad_held(DevPtr ptr, const metrale::core::LedgerEntry& e,
                            metrale::core::StreamObj* st, const char* file, int line,
                            bool* run_pass) noexcept;
  // Its body, inline into free_pooled (pool_fast_path.cpp, where both live).
  bool queue_freed_pad_inline(DevPtr ptr, const metrale::core::LedgerEntry& e,
                              metrale::core::StreamObj* st, const char* file, int line,
                              bool* run_pass) noexcept;
  // METRALE_REDZONE_REUSE (pad_reuse.cpp), with the ledger's lock held:
  // chain_ puts a freed padded block back into its stream's bins unchecked
  // (true) or leaves it to the check (false, nothing changed);
  // queue_unchecked_held is the pool's UncheckedSink: an unchecked block
  // joins the check list, named by its last owner with the earlier ones.
  bool chain_freed_pad_held(DevPtr ptr, const metrale::core::LedgerEntry& e,
                            metrale::core::StreamObj* st, const char* file, int line) noexcept;
  bool queue_unchecked_held(metrale::core::pool::Block* b) noexcept;
  // A freed block's check queued as p, by whichever path: the owners that
  // shared b's pad unchecked move to p, so that its report names them too.
  void take_earlier_owners_held(metrale::core::pool::Block* b, metrale::core::PendingPad* p) noexcept;
  // Every unchecked block to the check list (a scan, a trim, an OOM retry,
  // teardown); the lock not held.
  void flush_unchecked_pads();
  void run_unchecked_due() noexcept;
  // Logs (lock not held) the unchecked blocks the sink could not queue.
  void log_dropped_unchecked() noexcept;
  std::string earlier_owners_text(const metrale::core::pool::PadOwners::Owner* o, uint32_t n,
                                  bool known) const;
  // The earlier owners a queued check names (the OwnerLog read under the
  // ledger's lock); "" when none.
  std::string logged_earlier_owners(const metrale::core::PendingPad& p);
  // For a scan's message: the earlier owners of the live allocation
  // (ptr, seq)'s block since its pad's last check; "" when none.
  std::string live_pad_earlier_owners(DevPtr ptr, uint64_t seq);
  // An overrun was found on a block with earlier owners: no more reuse.
  void stop_pad_reuse(const char* why) noexcept;
  struct UncheckedPads final : metrale::core::pool::UncheckedSink {
    metrale_context* ctx = nullptr;
    bool take_unchecked(metrale::core::pool::Block* b) noexcept override;
  };
 public:
  // The batch check of every queued block: waits for the streams they were
  // used on, reads their tails in one backend pass, reports the overwritten
  // ones (log, event log, the next metrale_redzone_scan) and gives every
  // block back to the pool, the intact ones with their pattern record.
  // wait_for_other_pass: wait for a pass another thread runs (scan, trim,
  // out-of-memory retry, teardown); else leave the blocks to it. Errors are
  // logged; blocks then go back with no record.
  void verify_freed_pads(bool wait_for_other_pass) noexcept;
 private:
  struct FreedPadReport {
    metrale_redzone_violation_t v;  // file/line: the allocation site
    const char* free_file;
    int free_line;
    const char* tag;                // nullptr: none
    std::string earlier;            // METRALE_REDZONE_REUSE: the block's earlier owners
  };
  void run_verify_pass(std::vector<FreedPadReport>* reports);
  // The stream-ordered form of the pass (pad_check_ordered.cpp), under
  // verify_mutex_: start_ordered_checks queues a check on each freeing
  // stream for the blocks of *batch used there only, gives them back to the
  // pool at once and leaves the others in *batch; collect_ordered_checks
  // reads the finished checks' results (wait: all of them) and reports.
  void start_ordered_checks(std::vector<metrale::core::PendingPad>* batch);
  bool start_ordered_check(StreamHandle h, std::vector<metrale::core::PendingPad>* pads);
  void collect_ordered_checks(bool wait, std::vector<FreedPadReport>* reports);
  FreedPadReport describe_checked_pad(const metrale::core::PendingPad& p,
                                      const metrale::backend::Backend::PadCheck& r);
 public:
  // Checks queued in stream order whose results are not read yet: a scan
  // then waits for them (so that it reports what they find).
  bool ordered_checks_open() const {
    return ordered_checks_open_.load(std::memory_order_acquire) != 0;
  }
 private:
  // A report's sites, tag and block fields (describe_freed_pad and
  // describe_checked_pad add what was found).
  FreedPadReport freed_pad_report(const metrale::core::PendingPad& p);
  FreedPadReport describe_freed_pad(const metrale::core::PendingPad& p, uint32_t counted);
  // A checked block back to the pool with what of its range proved clean.
  void release_checked(const metrale::core::PendingPad& p,
                       metrale::core::pool::PatternRange pattern) noexcept;
  void release_all_intact(const std::vector<metrale::core::PendingPad>& ready) noexcept;
  void report_freed_pads(const std::vector<FreedPadReport>& reports);
  static std::string freed_pad_message(const FreedPadReport& r);
  // A scan's REDZONE_CORRUPTED message for `found` (sorted, not empty);
  // *stop_reuse: its first is a block reused unchecked.
  std::string scan_failure_text(const std::vector<metrale_redzone_violation_t>& found,
                                const std::vector<FreedPadReport>& freed, bool* stop_reuse);
  std::vector<FreedPadReport> take_freed_reports();
  // A scan that failed after taking them gives them back, oldest first.
  void put_back_freed_reports(std::vector<FreedPadReport>&& taken) noexcept;
  static constexpr size_t kMaxFreedReports = METRALE_REDZONE_FREED_REPORTS_MAX;
  // Starts timing a launch on st: true with *start recorded, false when the
  // timing is dropped (caps of KernelTimer; counted in timings_dropped).
  bool begin_timing(metrale::core::KernelObj* kern, metrale::core::StreamObj* st, size_t* row, EventHandle* start);
  void release_everything() noexcept;
  // A backend pinned block for a request of bytes (its class when cached);
  // on OUT_OF_MEMORY for a cacheable size with blocks cached, frees the
  // pinned pool's cache and retries once (pinned_memory.cpp).
  void* fresh_pinned_block(size_t bytes);
  // Backend frees of blocks the pinned pool let go; returns bytes freed.
  size_t free_pinned_blocks(const std::vector<metrale::core::PinnedCache::Block>& blocks) noexcept;

  metrale_context_options_t opts_;
  std::unique_ptr<metrale::backend::Backend> backend_;
  // What a launch watches, a bit each: debug_sync, the launch trace, kernel
  // timing. The bits are the settings themselves (no second copy to keep in
  // step), in one byte beside backend_ and fault_, the fast launch's other
  // reads: a launch with none set tests one byte on a line it reads anyway.
  static constexpr uint8_t kWatchDebugSync = 1, kWatchTrace = 2, kWatchTiming = 4;
  std::atomic<uint8_t> launch_watch_{0};
  void watch(uint8_t bit, bool on) {
    if (on) {
      launch_watch_.fetch_or(bit, std::memory_order_relaxed);
    } else {
      launch_watch_.fetch_and(static_cast<uint8_t>(~bit), std::memory_order_relaxed);
    }
  }
  bool watching(uint8_t bit) const {
    return (launch_watch_.load(std::memory_order_relaxed) & bit) != 0;
  }
  metrale::core::FaultLatch fault_;
  metrale::core::InternTable strings_;
  metrale::core::Ledger ledger_;
  std::atomic<uint64_t> seq_{0};    // red-zone index: metrale_alloc calls only; written under the ledger's lock
  std::unique_ptr<metrale::core::BoundsIndex> bounds_;  // checked pointers only
  metrale::core::PinnedRegistry pinned_;
  // Freed pinned blocks kept for reuse (opts_.pinned_pool; opts_ is set first).
  metrale::core::PinnedCache pinned_cache_{
      opts_.pinned_pool != 0 ? metrale::core::PinnedCache::kDefaultBudget : 0};
  std::mutex arenas_mutex_;
  std::unordered_map<DevPtr, size_t> arenas_;
  // In place, not behind a pointer: a launch's kernel lookup is one load
  // shorter (the chain after the driver's launch evicted our lines).
  std::optional<metrale::core::Modules> modules_;
  metrale::core::SlotTable<metrale::core::StreamObj> streams_{"stream"};
  metrale::core::SlotTable<metrale::core::EventObj> events_{"event"};
  metrale::core::SlotTable<metrale::core::GraphObj> graphs_{"graph"};
  // Wrapped native streams (stream_wrap.cpp): native value -> handle and
  // how many wraps are open. The mutex also covers the last unwrap's whole
  // destroy, so a new wrap of the value never meets the old one's retire.
  struct Wrap {
    metrale_stream* handle;
    uint64_t count;
  };
  std::mutex wraps_mutex_;
  std::unordered_map<uint64_t, Wrap> wraps_;
  // Under wraps_mutex_: drops one wrap of s; true when it was the last (the
  // caller then destroys the handle). INVALID_ARGUMENT when s is no longer
  // a live wrap (another thread's destroy ended it).
  bool drop_wrap(metrale_stream* s, const metrale::core::StreamObj* st);
  metrale::core::StreamObj* default_stream_ = nullptr;  // the object
  metrale_stream* default_stream_id_ = nullptr;         // its handle value

  metrale::core::Counters counters_;
  metrale::core::Ring<metrale_trace_entry_t> trace_;
  metrale::core::Ring<metrale_kernel_audit_entry_t> audit_;
  metrale::core::KernelTimer timer_;
  metrale::core::ScanFence scan_fence_;
  metrale::core::PadMirror pad_mirror_;  // red-zone scans' copy of the pad table
  std::atomic<int> captures_open_{0};
  std::mutex deferred_mutex_;
  std::vector<DeferredFree> deferred_;
  uint64_t deferred_round_ = 0;  // release_deferred's calls (deferred_mutex_)
  // The caching pool (opts_.pool); destroyed before the streams it orders.
  std::unique_ptr<metrale::core::pool::BackendChunkSource> chunk_source_;
  std::unique_ptr<metrale::core::pool::CachingPool> pool_;
  // What the fast paths need of the options, fixed at create: pool on, no
  // checked pointers, and no red zone (alloc) / no quarantine (free).
  bool fast_alloc_ = false;
  bool fast_free_ = false;
  bool fast_alloc_padded_ = false;  // the same with red zones on
  // Red zones on and quarantine_bytes > 0.
  std::unique_ptr<metrale::core::Quarantine> quarantine_;
  // Freed padded pooled blocks waiting for their check (pad_verify_ops.cpp),
  // one pass at a time, and what passes found until a scan reports it.
  metrale::core::PadVerifyQueue pad_verify_{&ledger_.mutex()};  // after ledger_
  // METRALE_REDZONE_REUSE (pad_reuse.cpp): owners per check, fixed at
  // create (1: every free is checked); reuse_off_: a finding turned it off;
  // unchecked_due_: the pool's sink filled the check list.
  size_t reuse_owners_ = 1;
  std::atomic<bool> reuse_off_{false};
  std::atomic<bool> unchecked_due_{false};
  std::atomic<uint64_t> unchecked_dropped_{0};
  UncheckedPads unchecked_sink_;
  metrale::core::OwnerLog owner_log_;  // under the ledger's lock
  std::mutex verify_mutex_;
  // A free that met a bound but could not run its pass (another thread
  // holds verify_mutex_, or it came from a host kernel or from inside a
  // pass) sets it; whoever lets go of verify_mutex_ looks at it afterwards
  // and runs the pass those frees left (verify_freed_pads). Without it such
  // a block waited, unchecked, for an unrelated later pass.
  std::atomic<bool> pass_wanted_{false};
  // A pass's scratch (run_verify_pass), under verify_mutex_: kept so that a
  // steady loop allocates nothing per pass. Members, not thread_locals: in
  // this shared library each thread_local use is a __tls_get_addr call.
  struct VerifyScratch {
    std::vector<StreamHandle> waits;
    std::vector<size_t> first;
    std::vector<metrale::backend::Range> ranges;
    std::vector<size_t> at;
    std::vector<uint32_t> bad;
    std::vector<metrale::backend::Backend::PadCheck> results;
  } verify_scratch_;
  // Checks queued in stream order, oldest first (pad_check_ordered.cpp):
  // the blocks are back in the pool; their results are still to be read.
  // pads: what the report needs (sites, seq, sizes). Their block pointers
  // and streams are stale once the blocks are back (reused, merged, their
  // stream destroyed) and are never read.
  struct OrderedCheck {
    uint64_t ticket = 0;
    std::vector<metrale::core::PendingPad> pads;
    size_t ranges = 0;  // ranges the pass read (a pad's result: PendingPad::result)
  };
  std::vector<OrderedCheck> ordered_checks_;  // under verify_mutex_
  // Checked blocks that could not go back to the pool (release_all_intact,
  // short of memory) and wait on the list again: a trim that saw one fails.
  std::atomic<uint64_t> release_failures_{0};
  std::atomic<size_t> ordered_checks_open_{0};
  // METRALE_REDZONE_VERIFY_ORDERED=0, or a batch of one, turns the
  // stream-ordered check off: every pass waits for its streams.
  bool ordered_checks_ok_ = true;
  std::mutex freed_reports_mutex_;
  std::vector<FreedPadReport> freed_reports_;
  std::atomic<bool> warned_pinned_source_{false};
  // METRALE_NVTX allows it and a tool listens (mem_annotations_begin): the
  // pool's chunk source annotates chunks and blocks. Set once at create.
  bool annotate_memory_ = false;
  metrale::core::staging::Stager staging_{opts_};  // released in release_everything
  metrale::core::EventLog event_log_;  // METRALE_EVENT_LOG / metrale_event_log_open
};

namespace metrale::core {
using Context = ::metrale_context;
// The sink METRALE_EVENT_LOG names (nullptr: unset); INVALID_ARGUMENT naming
// the variable when it cannot be opened (event_log_ops.cpp).
std::shared_ptr<EventSink> event_log_from_env();
}  // namespace metrale::core
