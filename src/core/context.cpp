#include "core/context.hpp"

#include <cstring>
#include <mutex>

#include "core/format.hpp"
#include "core/log.hpp"
#include "core/options.hpp"

using metrale::Error;
using metrale::fail;
namespace be = metrale::backend;

namespace metrale::core {
namespace {

// Live contexts, for the api's check of a ctx argument. Slots are scanned
// up to the high-water mark with relaxed loads: one context means one load.
constexpr size_t kMaxContexts = 256;
std::atomic<const metrale_context*> g_live[kMaxContexts];
std::atomic<size_t> g_live_high{0};
std::mutex g_live_mutex;

void register_live(const metrale_context* ctx) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  for (size_t i = 0; i < kMaxContexts; ++i) {
    if (g_live[i].load(std::memory_order_relaxed) == nullptr) {
      g_live[i].store(ctx, std::memory_order_release);
      if (i + 1 > g_live_high.load(std::memory_order_relaxed)) {
        g_live_high.store(i + 1, std::memory_order_release);
      }
      return;
    }
  }
  fail(METRALE_ERROR_OUT_OF_MEMORY,
       "too many live contexts (" + std::to_string(kMaxContexts) + "); destroy one first");
}

void unregister_live(const metrale_context* ctx) {
  std::lock_guard<std::mutex> lock(g_live_mutex);
  size_t high = g_live_high.load(std::memory_order_relaxed);
  for (size_t i = 0; i < high; ++i) {
    if (g_live[i].load(std::memory_order_relaxed) == ctx) {
      g_live[i].store(nullptr, std::memory_order_release);
      return;
    }
  }
}

std::unique_ptr<be::Backend> open_backend(const metrale_context_options_t& o) {
  if (o.backend == METRALE_BACKEND_HOST) return be::make_host_backend();
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
    return be::make_host_backend();
  }
}

}  // namespace

bool is_live_context(const metrale_context* ctx) {
  size_t high = g_live_high.load(std::memory_order_acquire);
  for (size_t i = 0; i < high; ++i) {
    if (g_live[i].load(std::memory_order_relaxed) == ctx) return true;
  }
  return false;
}

}  // namespace metrale::core

metrale_context::metrale_context(const metrale_context_options_t& opts)
    : opts_(opts), trace_(opts.trace_capacity), audit_(opts.trace_capacity) {
  trace_on_.store(opts.launch_trace != 0);
  kernel_timing_.store(opts.kernel_timing != 0);
  if (opts.checked_pointers != 0) bounds_ = std::make_unique<metrale::core::BoundsIndex>();
}

metrale_context* metrale_context::create(const metrale_context_options_t* given) {
  metrale::core::apply_log_env();
  metrale_context_options_t opts = metrale::core::resolve_options(given);
  std::unique_ptr<metrale_context> ctx(new metrale_context(opts));
  ctx->backend_ = metrale::core::open_backend(opts);
  ctx->modules_ = std::make_unique<metrale::core::Modules>(*ctx->backend_, ctx->strings_);
  metrale_stream* s = ctx->streams_.acquire();
  try {
    s->handle = ctx->backend_->stream_create();
  } catch (...) {
    ctx->backend_.reset();
    throw;
  }
  s->owner = ctx.get();
  s->is_default = true;
  s->alive.store(true);
  ctx->default_stream_ = s;
  try {
    metrale::core::register_live(ctx.get());
  } catch (...) {
    ctx->release_everything();
    throw;
  }
  metrale::core::log().debug("context created on the {} backend (redzone {} bytes, checked {})",
                             ctx->backend_->kind() == METRALE_BACKEND_CUDA ? "cuda" : "host",
                             opts.redzone_bytes, opts.checked_pointers);
  return ctx.release();
}

void metrale_context::destroy() noexcept {
  metrale::core::unregister_live(this);
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
  quietly([&] { sweep(); });
  for (metrale_graph* g : graphs_.alive()) {
    g->alive.store(false);
    quietly([&] { backend_->graph_destroy(g->handle); });
  }
  // No pass can be open at teardown; free whatever one still held back.
  free_held(scan_fence_.drain());
  if (backend_) timer_.release(*backend_);
  for (metrale_event* e : events_.alive()) {
    e->alive.store(false);
    quietly([&] { backend_->event_destroy(e->handle); });
  }
  for (metrale_stream* s : streams_.alive()) {
    if (s->is_default) continue;
    s->alive.store(false);
    quietly([&] { backend_->capture_abort(s->handle); });
    quietly([&] { backend_->stream_destroy(s->handle); });
  }
  if (modules_) modules_->unload_all();
  {
    std::lock_guard<std::mutex> lock(arenas_mutex_);
    for (const auto& kv : arenas_) quietly([&] { backend_->mem_free(kv.first); });
    arenas_.clear();
  }
  for (const auto& r : pinned_.all()) {
    void* p = reinterpret_cast<void*>(r.base);
    if (r.kind == metrale::core::PinKind::Allocated) {
      quietly([&] { backend_->host_free_pinned(p); });
    } else {
      quietly([&] { backend_->host_unregister(p); });
    }
  }
  if (default_stream_ != nullptr) {
    default_stream_->alive.store(false);
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

// Nothing is cached for reuse in this version, so it is the device's answer.
size_t metrale_context::free_memory() { return device_free_memory(); }

// --- shared helpers ---------------------------------------------------------

metrale_stream* metrale_context::stream_of(metrale_stream* s) const {
  if (s == nullptr) return default_stream_;
  if (s->owner != this) fail(METRALE_ERROR_INVALID_ARGUMENT, "stream belongs to another context");
  if (!s->alive.load(std::memory_order_acquire)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "stream was destroyed");
  }
  return s;
}

metrale_event* metrale_context::event_of(metrale_event* e, const char* what) const {
  if (e == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(what) + " is NULL");
  if (e->owner != this) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(what) + " belongs to another context");
  }
  if (!e->alive.load(std::memory_order_acquire)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(what) + " was destroyed");
  }
  return e;
}

metrale_graph* metrale_context::graph_of(metrale_graph* g) const {
  if (g == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "graph is NULL");
  if (g->owner != this) fail(METRALE_ERROR_INVALID_ARGUMENT, "graph belongs to another context");
  if (!g->alive.load(std::memory_order_acquire)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "graph was destroyed");
  }
  return g;
}

metrale_kernel* metrale_context::kernel_of(metrale_kernel* k) const {
  if (k == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "kernel is NULL");
  if (k->owner != this) fail(METRALE_ERROR_INVALID_ARGUMENT, "kernel belongs to another context");
  if (k->stale.load(std::memory_order_acquire)) {
    fail(METRALE_ERROR_NOT_FOUND,
         std::string("kernel ") + k->name + " belongs to a module that was unloaded");
  }
  return k;
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

void metrale_context::sync(StreamHandle h, const char* what) {
  metrale::core::Counters::bump(counters_.stream_syncs);
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
