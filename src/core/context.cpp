#include "core/context.hpp"

#include <cstdio>
#include <cstring>
#include <mutex>

#include "core/format.hpp"
#include "core/log.hpp"
#include "core/nvtx_setting.hpp"
#include "core/options.hpp"

using metrale::Error;
using metrale::fail;
namespace be = metrale::backend;

namespace metrale::core {
namespace {

std::unique_ptr<be::Backend> open_backend(const metrale_context_options_t& o) {
  if (o.backend == METRALE_BACKEND_HOST) return be::make_host_backend(o.device);
  if (o.backend == METRALE_BACKEND_CUDA) return be::make_cuda_backend(o.device);
  try {
    auto b = be::make_cuda_backend(o.device);
    // Not std::call_once: the line may reach a log callback that creates a
    // context itself, and call_once entered again on one thread deadlocks.
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) log().info("backend auto: using cuda device {}", o.device);
    return b;
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_NO_DRIVER && e.status() != METRALE_ERROR_NO_DEVICE) throw;
    static std::atomic<bool> logged{false};
    if (!logged.exchange(true)) {
      log().info("backend auto: using host, because cuda is unavailable: {}", e.what());
    }
    return be::make_host_backend(o.device);
  }
}

}  // namespace

}  // namespace metrale::core

metrale_context::metrale_context(const metrale_context_options_t& opts)
    : opts_(opts), trace_("launch trace", opts.trace_capacity), audit_("kernel audit", opts.trace_capacity) {
  watch(kWatchTrace, opts.launch_trace != 0);
  watch(kWatchTiming, opts.kernel_timing != 0);
  watch(kWatchDebugSync, opts.debug_sync != 0);
  if (opts.checked_pointers != 0) bounds_ = std::make_unique<metrale::core::BoundsIndex>();
  if (opts.redzone_bytes > 0 && opts.quarantine_bytes > 0) {
    quarantine_ = std::make_unique<metrale::core::Quarantine>(opts.quarantine_bytes);
  }
}

metrale_context_t* metrale_context::create(const metrale_context_options_t* given) {
  using metrale::core::handle_id::handle_from;
  metrale::core::apply_log_env();
  metrale_context_options_t opts = metrale::core::resolve_options(given);
  const auto nvtx = metrale::core::nvtx_setting();  // METRALE_NVTX, refused before anything opens
  // METRALE_REDZONE_VERIFY_*: refused before anything opens.
  const metrale::core::PadVerifyQueue::Limits verify = metrale::core::PadVerifyQueue::limits_from_env();
  std::unique_ptr<metrale_context> ctx(new metrale_context(opts));
  ctx->pad_verify_.set_limits(verify);
  // A batch of one asks for each free's check, and its report, before the
  // free returns: the synchronous pass.
  ctx->ordered_checks_ok_ = verify.ordered && verify.count > 1;
  ctx->backend_ = metrale::core::open_backend(opts);
  ctx->annotate_memory_ = ctx->backend_->mem_annotations_begin(nvtx);
  ctx->modules_.emplace(*ctx->backend_, ctx->strings_);
  if (opts.pool != 0) {
    ctx->chunk_source_ = std::make_unique<metrale::core::pool::BackendChunkSource>(
        *ctx->backend_, ctx->annotate_memory_);
    // One lock for a pooled block and its ledger entry (rule 9).
    ctx->pool_ = std::make_unique<metrale::core::pool::CachingPool>(*ctx->chunk_source_,
                                                                     &ctx->ledger_.mutex());
    ctx->pool_->set_checked_bin_cap(verify.count);
    if (opts.redzone_bytes > 0 && !ctx->quarantine_ && verify.reuse > 1) {
      ctx->reuse_owners_ = verify.reuse;
      ctx->owner_log_.reserve();
      ctx->unchecked_sink_.ctx = ctx.get();
      ctx->pool_->set_unchecked_sink(&ctx->unchecked_sink_);
    }
  }
  // The pooled fast paths' fixed conditions (pool_fast_path.cpp).
  ctx->fast_alloc_ = ctx->pool_ && !ctx->bounds_ && opts.redzone_bytes == 0;
  ctx->fast_free_ = ctx->pool_ && !ctx->bounds_ && !ctx->quarantine_;
  ctx->fast_alloc_padded_ = ctx->pool_ && !ctx->bounds_ && opts.redzone_bytes > 0;
  // Opened before the context is published: a bad path fails the create.
  std::shared_ptr<metrale::core::EventSink> env_log = metrale::core::event_log_from_env();
  StreamHandle h = ctx->backend_->stream_create();
  uint64_t handle = 0;
  try {
    uint64_t sid = ctx->streams_.insert([&](metrale::core::StreamObj& s) {
      s.owner = ctx.get();
      s.handle = h;
      s.is_default = true;
      ctx->default_stream_ = &s;
    });
    ctx->default_stream_id_ = handle_from<metrale_stream>(sid);
    handle = metrale::core::register_context(ctx.get());
  } catch (...) {
    if (ctx->default_stream_ == nullptr) {
      try {
        ctx->backend_->stream_destroy(h);
      } catch (...) {
        // Creation failed already; the stream goes with the backend.
      }
    }
    ctx->release_everything();
    throw;
  }
  if (env_log) ctx->event_log_.attach(std::move(env_log), ctx->event_header(handle));
  metrale::core::log().debug(
      "context created on the {} backend (redzone {} bytes, checked {}, NVTX memory annotations {})",
      ctx->backend_->kind() == METRALE_BACKEND_CUDA ? "cuda" : "host", opts.redzone_bytes,
      opts.checked_pointers, ctx->annotate_memory_ ? "on" : "off");
  ctx.release();
  return handle_from<metrale_context_t>(handle);
}

void metrale_context::destroy() noexcept {
  release_everything();
  delete this;
}

void metrale_context::release_everything() noexcept {
  auto quietly = [](auto&& f) {
    try {
      f();
    } catch (...) {
      // Teardown frees what it can; the context is gone either way.
    }
  };
  // Captures still open die with the context (below): closed first, as
  // metrale_stream_destroy does, so that the frees they deferred (rule 9)
  // and the sweep's reach the pool through the red-zone check. A wrapped
  // stream's capture is its owner's.
  if (captures_open_.load(std::memory_order_acquire) != 0) {
    for (metrale::core::StreamObj* s : streams_.live()) {
      if (!s->owns_backend || !s->capture_counted.load(std::memory_order_acquire)) continue;
      quietly([&] { backend_->capture_abort(s->handle); });
      note_capture_closed(s);
    }
  }
  quietly([&] { sweep(); });
  quietly([&] { check_quarantine_at_destroy(); });  // writes after free, logged
  if (quarantine_) release_quarantined(quarantine_->drain());
  // Every padded block freed so far (the sweep's and the quarantine's too,
  // and those reused unchecked) is checked and goes back to the pool
  // before it is destroyed; overwritten pads are logged.
  quietly([&] { flush_unchecked_pads(); });
  verify_freed_pads(true);
  {
    // Streams whose destroy a host kernel left to a pass: retired while
    // the pool and the backend still exist.
    std::lock_guard<std::mutex> serial(verify_mutex_);
    run_retirements_locked();
  }
  quietly([&] { event_log_.close(); });  // after the sweep's frees; flushes the file
  if (backend_) staging_.release(*backend_);  // its DMAs finish before its streams go
  // The tables die with the context: no handle of it is found after this.
  for (metrale::core::GraphObj* g : graphs_.live()) {
    quietly([&] { backend_->graph_destroy(g->handle); });
  }
  // No pass can be open at teardown; free whatever one still held back.
  free_held(scan_fence_.drain());
  // Every block is back: the pool waits for its streams' events and gives
  // its chunks to the driver, while those streams still exist.
  // The sink (a member of this context) must not outlive its use.
  if (pool_) pool_->set_unchecked_sink(nullptr);
  pool_.reset();
  chunk_source_.reset();
  if (backend_) timer_.release(*backend_);
  for (metrale::core::EventObj* e : events_.live()) {
    quietly([&] { backend_->event_destroy(e->handle); });
  }
  for (EventHandle e : settle_events_) quietly([&] { backend_->event_destroy(e); });
  settle_events_.clear();
  release_buried_handles();
  for (metrale::core::StreamObj* s : streams_.live()) {
    if (s->is_default || !s->owns_backend) continue;  // a wrapped stream is the caller's
    quietly([&] { backend_->capture_abort(s->handle); });
    quietly([&] { backend_->stream_destroy(s->handle); });
  }
  if (modules_) modules_->unload_all();
  {
    std::lock_guard<std::mutex> lock(arenas_mutex_);
    for (const auto& kv : arenas_) quietly([&] { backend_->mem_free(kv.first); });
    arenas_.clear();
  }
  quietly([&] { pinned_pool_trim(0); });  // cached pinned blocks
  for (const auto& r : pinned_.all()) {
    void* p = reinterpret_cast<void*>(r.base);
    if (r.kind == metrale::core::PinKind::Allocated) {
      quietly([&] { backend_->host_free_pinned(p); });
    } else {
      quietly([&] { backend_->host_unregister(p); });
    }
  }
  if (default_stream_ != nullptr) {
    quietly([&] { backend_->capture_abort(default_stream_->handle); });
    quietly([&] { backend_->stream_destroy(default_stream_->handle); });
  }
  backend_.reset();
}

void metrale_context::bind_thread() {
  fault_.check();
  device([&] { backend_->bind_thread(); });
}

void metrale_context::device_info(metrale_device_info_t* info) {
  fault_.check();
  be::DeviceInfo d = device([&] { return backend_->device_info(); });
  std::memset(info, 0, sizeof(*info));
  std::strncpy(info->name, d.name.c_str(), sizeof(info->name) - 1);
  info->compute_major = d.compute_major;
  info->compute_minor = d.compute_minor;
  info->sm_count = d.sm_count;
  info->total_memory = d.total_memory;
  info->backend = backend_->kind();
  info->ordinal = d.ordinal;
}

size_t metrale_context::total_memory() {
  fault_.check();
  size_t free_b = 0, total = 0;
  device([&] { backend_->mem_info(&free_b, &total); });
  return total;
}

size_t metrale_context::device_free_memory() {
  fault_.check();
  size_t free_b = 0, total = 0;
  device([&] { backend_->mem_info(&free_b, &total); });
  return free_b;
}

// The device's answer plus what the pool holds for reuse: its cache and the
// blocks waiting for their red-zone check.
size_t metrale_context::free_memory() {
  const size_t device_free = device_free_memory();
  // Waiting blocks count: an out-of-memory retry checks them and hands them
  // out.
  if (!pool_) return device_free;
  // At one moment (the pool's lock is the list's): a block a check pass
  // moves from the list to the cache is counted once.
  std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
  return device_free + pool_->stats_held().cached + pad_verify_.bytes_held();
}

// --- shared helpers ---------------------------------------------------------

void metrale_context::refuse_handle(const char* what, const void* h) {
  if (h == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  char hex[32];
  std::snprintf(hex, sizeof hex, "%p", h);
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string(what) + " " + hex + " is not a live handle of this context (destroyed, " +
           "made by another context or a destroyed one, or not a handle of this kind)");
}

void metrale_context::refuse_kernel(const metrale_kernel* k, const metrale::core::KernelObj* o) {
  if (o == nullptr) refuse_handle("kernel", k);
  fail(METRALE_ERROR_NOT_FOUND,
       std::string("kernel ") + o->name + " belongs to a module that was unloaded");
}

void metrale_context::fail_after_probe(const Error& e, const std::string& what) {
  if (e.status() == METRALE_ERROR_CONTEXT_LOST) {
    fault_.latch(what + e.what());
    throw Error(METRALE_ERROR_CONTEXT_LOST, what + e.what(), e.driver_code());
  }
  std::string probe;
  // Only an error the backend could not classify may be a sticky fault in
  // disguise: a plain bad argument (block of 2048 threads, say) leaves the
  // context as healthy as before and is returned as is, and a sticky fault
  // already came as CONTEXT_LOST above. The probe never synchronizes (see
  // Backend::probe_fault): other libraries' streams share the context.
  if (e.status() != METRALE_ERROR_CAPTURE && backend_->may_hide_fault(e)) {
    try {
      probe = backend_->probe_fault();
    } catch (const std::exception& pe) {
      probe = pe.what();
    }
  }
  if (!probe.empty()) {
    std::string msg = what + e.what() + "; the context is lost: " + probe;
    fault_.latch(msg);
    throw Error(METRALE_ERROR_CONTEXT_LOST, msg, e.driver_code());
  }
  throw Error(e.status(), what + e.what(), e.driver_code());
}

// Counted once the wait is done: a wait the backend refused (CAPTURE, or
// INVALID_ARGUMENT when it would deadlock with a host kernel on another
// thread) did nothing and moves no counter (rule 1).
void metrale_context::sync(StreamHandle h, const char* what) {
  sync_uncounted(h, what);
  metrale::core::Counters::bump(counters_.stream_syncs);
}

void metrale_context::sync_uncounted(StreamHandle h, const char* what) {
  try {
    backend_->stream_synchronize(h);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_CAPTURE) throw;
    fail_after_probe(e, std::string(what) + ": ");
  }
}

void metrale_context::check_range(DevPtr p, size_t bytes, const char* what) const {
  if (bounds_ != nullptr && bytes > 0) bounds_->check(p, bytes, what);
}
