// Kernel launches: handle and argument checks, the launch trace, event
// timing, fault latching with the kernel named, and debug_sync.
#include <algorithm>
#include <cstring>

#include "core/context.hpp"

using metrale::Error;
using metrale::fail;

namespace {

[[noreturn, gnu::cold, gnu::noinline]] void fail_dims(const metrale_dim3_t& grid,
                                                     const metrale_dim3_t& block) {
  const struct {
    const char* name;
    uint32_t v;
  } dims[] = {{"grid.x", grid.x},   {"grid.y", grid.y},   {"grid.z", grid.z},
              {"block.x", block.x}, {"block.y", block.y}, {"block.z", block.z}};
  for (const auto& d : dims) {
    if (d.v == 0) fail(METRALE_ERROR_INVALID_ARGUMENT, std::string(d.name) + " is 0");
  }
  fail(METRALE_ERROR_INTERNAL, "fail_dims called with no zero dimension");
}

// One branch on the launch path; the message is built out of line.
inline void check_dims(const metrale_dim3_t& grid, const metrale_dim3_t& block) {
  if ((grid.x == 0) | (grid.y == 0) | (grid.z == 0) | (block.x == 0) | (block.y == 0) |
      (block.z == 0)) {
    fail_dims(grid, block);
  }
}

metrale::backend::Dim3 dim(const metrale_dim3_t& d) { return {d.x, d.y, d.z}; }

}  // namespace

void metrale_context::launch(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                             uint32_t shared, metrale_stream* s, void** params) {
  launch_common(k, grid, block, shared, s, params, nullptr, 0, false);
}

void metrale_context::launch_packed(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                                    uint32_t shared, metrale_stream* s, const void* args,
                                    size_t args_bytes) {
  launch_common(k, grid, block, shared, s, nullptr, args, args_bytes, true);
}

void metrale_context::trace_launch(const metrale::core::KernelObj* k, metrale_dim3_t grid,
                                   metrale_dim3_t block, uint32_t shared, void** params,
                                   const void* args, size_t args_bytes, bool packed) {
  metrale_trace_entry_t t{};
  t.kind = METRALE_TRACE_LAUNCH;
  t.kernel = k->name;
  t.grid = grid;
  t.block = block;
  t.shared_bytes = shared;
  if (k->layout_known) {
    size_t n = std::min<size_t>(k->params.size(), METRALE_TRACE_MAX_ARGS);
    for (size_t i = 0; i < n; ++i) {
      const auto& p = k->params[i];
      const void* src = packed ? static_cast<const char*>(args) + p.offset
                               : (params != nullptr ? params[i] : nullptr);
      uint64_t v = 0;
      if (src != nullptr) std::memcpy(&v, src, std::min<size_t>(p.size, sizeof v));
      t.args[i] = v;
    }
    t.nargs = static_cast<uint32_t>(n);
  } else if (packed && args != nullptr) {
    size_t bytes = std::min<size_t>(args_bytes, METRALE_TRACE_MAX_ARGS * sizeof(uint64_t));
    std::memcpy(t.args, args, bytes);
    t.nargs = static_cast<uint32_t>((bytes + 7) / 8);
  }
  trace_.push(t);
}

metrale::backend::EventHandle metrale_context::timing_event() {
  {
    std::lock_guard<std::mutex> lock(timing_mutex_);
    if (!free_timing_events_.empty()) {
      EventHandle e = free_timing_events_.back();
      free_timing_events_.pop_back();
      return e;
    }
  }
  return device([&] { return backend_->event_create(true); });
}

void metrale_context::launch_common(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                                    uint32_t shared, metrale_stream* s, void** params,
                                    const void* args, size_t args_bytes, bool packed) {
  fault_.check();
  auto* kern = kernel_of(k);
  auto* st = stream_of(s);
  check_dims(grid, block);
  if (packed) {
    if (args == nullptr && args_bytes > 0) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "args is NULL but args_bytes is " + std::to_string(args_bytes));
    }
    if (kern->layout_known && args_bytes != kern->params_bytes) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           std::string("kernel ") + kern->name + " takes " + std::to_string(kern->params_bytes) +
               " bytes of parameters (" + std::to_string(kern->params.size()) + " parameters), got " +
               std::to_string(args_bytes));
    }
  } else if (params == nullptr && kern->layout_known && !kern->params.empty()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("params is NULL but kernel ") + kern->name +
                                             " takes " + std::to_string(kern->params.size()) +
                                             " parameters");
  }
  if (trace_on_.load(std::memory_order_relaxed)) {
    trace_launch(kern, grid, block, shared, params, args, args_bytes, packed);
  }

  bool timed = false;
  EventHandle start = 0;
  if (kernel_timing_.load(std::memory_order_relaxed) &&
      !device([&] { return backend_->stream_is_capturing(st->handle); })) {
    start = timing_event();
    device([&] { backend_->event_record(start, st->handle); });
    timed = true;
  }

  // Not through device(): the latch must get the message naming the kernel.
  try {
    if (packed) {
      backend_->launch_packed(kern->func, dim(grid), dim(block), shared, st->handle, args,
                              args_bytes);
    } else {
      backend_->launch(kern->func, dim(grid), dim(block), shared, st->handle, params);
    }
  } catch (const Error& e) {
    if (timed) {
      std::lock_guard<std::mutex> lock(timing_mutex_);
      free_timing_events_.push_back(start);
    }
    fail_after_probe(e, std::string("launch of ") + kern->name + " (looked up at " + kern->site +
                            ") failed: ");
  }
  metrale::core::Counters::bump(counters_.launches);

  if (timed) {
    EventHandle end = timing_event();
    device([&] { backend_->event_record(end, st->handle); });
    size_t row = timings_.count_launch(kern->name, kern->name);
    std::lock_guard<std::mutex> lock(timing_mutex_);
    pending_spans_.push_back(metrale::core::PendingSpan{row, start, end});
  }
  if (opts_.debug_sync != 0) {
    sync(st->handle, ("debug_sync after launch of " + std::string(kern->name)).c_str());
  }
}
