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

metrale_trace_entry_t metrale_context::trace_launch(const metrale::core::KernelObj* k, metrale_dim3_t grid,
                                                    metrale_dim3_t block, uint32_t shared,
                                                    void** params, const void* args,
                                                    size_t args_bytes, bool packed) {
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
  return t;
}

bool metrale_context::begin_timing(metrale::core::KernelObj* kern, metrale::core::StreamObj* st, size_t* row,
                                   EventHandle* start) {
  *row = timer_.row_for(kern, kern->name);
  if (*row == metrale::core::KernelTimer::kNoRow || !timer_.reserve(*backend_)) {
    metrale::core::Counters::bump(counters_.timings_dropped);
    return false;
  }
  EventHandle e = 0;
  try {
    e = device([&] { return timer_.take_event(*backend_); });
    device([&] { backend_->event_record(e, st->handle); });
  } catch (...) {
    if (e != 0) timer_.give_back(*backend_, e);
    timer_.unreserve();
    throw;
  }
  *start = e;
  return true;
}

// Refuses args that do not fit the kernel's layout. Inline: the checks are
// a few compares; the messages are built out of line, only on failure.
[[gnu::always_inline]] inline void metrale_context::check_launch_args(const metrale::core::KernelObj* kern, void** params,
                                        const void* args, size_t args_bytes, bool packed) {
  const bool bad =
      packed ? ((args == nullptr && args_bytes > 0) ||
                (!kern->layout_known && args_bytes > METRALE_PACKED_ARGS_MAX_BYTES) ||
                (kern->layout_known && args_bytes != kern->params_bytes))
             : (params == nullptr && kern->layout_known && !kern->params.empty());
  if (bad) refuse_launch_args(kern, args, args_bytes, packed);
}

void metrale_context::refuse_launch_args(const metrale::core::KernelObj* kern, const void* args,
                                         size_t args_bytes, bool packed) {
  if (packed) {
    if (args == nullptr && args_bytes > 0) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "args is NULL but args_bytes is " + std::to_string(args_bytes));
    }
    // Without a layout nothing tells how much the kernel reads: cap the
    // buffer at the driver's classic parameter limit, so a wrong args_bytes
    // (SIZE_MAX, a length in elements) is refused instead of being read
    // past the caller's buffer or wrapping the backend's size arithmetic.
    if (!kern->layout_known && args_bytes > METRALE_PACKED_ARGS_MAX_BYTES) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           std::string("kernel ") + kern->name + " has no known parameter layout and args_bytes is " +
               std::to_string(args_bytes) + ", more than METRALE_PACKED_ARGS_MAX_BYTES (" +
               std::to_string(METRALE_PACKED_ARGS_MAX_BYTES) + ")");
    }
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("kernel ") + kern->name + " takes " + std::to_string(kern->params_bytes) +
             " bytes of parameters (" + std::to_string(kern->params.size()) + " parameters), got " +
             std::to_string(args_bytes));
  }
  fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("params is NULL but kernel ") + kern->name +
                                           " takes " + std::to_string(kern->params.size()) +
                                           " parameters");
}

void metrale_context::fail_launch(const metrale::core::KernelObj* kern, const Error& e) {
  fail_after_probe(e, std::string("launch of ") + kern->name + " (looked up at " + kern->site +
                          ") failed: ");
}

// The backend's launch, packed or not. Not through device(): the latch
// must get the message naming the kernel. Inline into both launch paths
// (the hot one's code stays one contiguous stretch, see below).
[[gnu::always_inline]] inline void metrale_context::launch_on_backend(
    const metrale::core::KernelObj* kern, metrale_dim3_t grid, metrale_dim3_t block,
    uint32_t shared, metrale::core::StreamObj* st, void** params, const void* args,
    size_t args_bytes, bool packed) {
  try {
    if (packed) {
      backend_->launch_packed(kern->func, dim(grid), dim(block), shared, st->handle, args,
                              args_bytes);
    } else {
      backend_->launch(kern->func, dim(grid), dim(block), shared, st->handle, params);
    }
  } catch (const Error& e) {
    fail_launch(kern, e);
  }
}

// The common case (no trace, no timing, no debug_sync) is the checks, the
// backend call and one counter: no trace entry is built or zeroed, nothing is
// locked. Anything on goes through launch_observed.
//
// Inlined into launch and launch_packed, which are hot (one section with the
// API shims and the cuda backend's launch): each launch runs one short
// stretch of contiguous code. The driver's launch evicts the CPU's
// instruction cache, so every distinct 64-byte line of ours is fetched
// again each time; on an H100 host that refetch was most of the library's
// ~100 ns over a raw cuLaunchKernel (bench_launch, r19).
[[gnu::always_inline]] inline void metrale_context::launch_common(metrale_kernel* k, metrale_dim3_t grid, metrale_dim3_t block,
                                    uint32_t shared, metrale_stream* s, void** params,
                                    const void* args, size_t args_bytes, bool packed) {
  fault_.check();
  auto* kern = kernel_of(k);
  auto* st = stream_of(s);
  check_dims(grid, block);
  check_launch_args(kern, params, args, args_bytes, packed);
  if (launch_watch_.load(std::memory_order_relaxed) != 0) [[unlikely]] {
    launch_observed(kern, grid, block, shared, st, params, args, args_bytes, packed);
    return;
  }
  launch_on_backend(kern, grid, block, shared, st, params, args, args_bytes, packed);
  counters_.launches.add();
}

[[gnu::hot]] void metrale_context::launch(metrale_kernel* k, metrale_dim3_t grid,
                                          metrale_dim3_t block, uint32_t shared,
                                          metrale_stream* s, void** params) {
  launch_common(k, grid, block, shared, s, params, nullptr, 0, false);
}

[[gnu::hot]] void metrale_context::launch_packed(metrale_kernel* k, metrale_dim3_t grid,
                                                 metrale_dim3_t block, uint32_t shared,
                                                 metrale_stream* s, const void* args,
                                                 size_t args_bytes) {
  launch_common(k, grid, block, shared, s, nullptr, args, args_bytes, true);
}

// A launch with the trace, kernel timing or debug_sync on; handles and
// arguments are checked already.
void metrale_context::launch_observed(metrale::core::KernelObj* kern, metrale_dim3_t grid,
                                      metrale_dim3_t block, uint32_t shared,
                                      metrale::core::StreamObj* st, void** params,
                                      const void* args, size_t args_bytes, bool packed) {
  if (opts_.debug_sync != 0) {
    refuse_wait_in_own_work(st->handle, "a launch with debug_sync");
  }
  // The entry is built from the arguments as they are now, and pushed only
  // once the launch was taken: a failed launch leaves the trace as it was.
  const bool traced = watching(kWatchTrace);
  metrale_trace_entry_t entry{};
  if (traced) entry = trace_launch(kern, grid, block, shared, params, args, args_bytes, packed);

  // Timing events and the debug_sync wait cannot go into a capture: both are
  // skipped while the stream captures (a wait would fail after the launch
  // was recorded, breaking rule 1).
  const bool want_timing = watching(kWatchTiming);
  const bool in_capture = (want_timing || opts_.debug_sync != 0) && capturing(st);
  bool timed = false;
  EventHandle start = 0;
  size_t row = 0;
  if (want_timing && !in_capture) {
    timed = begin_timing(kern, st, &row, &start);
  }

  try {
    launch_on_backend(kern, grid, block, shared, st, params, args, args_bytes, packed);
  } catch (...) {
    // Any failure, a backend short of host memory (std::bad_alloc) too: the
    // start event goes back with its reservation (rule 1).
    if (timed) {  // the launch failed: its timing start is undone
      timer_.give_back(*backend_, start);
      timer_.unreserve();
    }
    throw;
  }
  counters_.launches.add();
  if (traced) trace_.push(entry);

  if (timed) {
    EventHandle end = 0;
    try {
      end = device([&] { return timer_.take_event(*backend_); });
      device([&] { backend_->event_record(end, st->handle); });
      timer_.push(st->handle, row, start, end);  // changes nothing when it throws
    } catch (...) {
      // The kernel is launched, so the call succeeds and only its timing is
      // lost (a lost context is latched by device() for the next call).
      if (end != 0) timer_.give_back(*backend_, end);
      timer_.give_back(*backend_, start);
      timer_.unreserve();
      metrale::core::Counters::bump(counters_.timings_dropped);
    }
  }
  if (opts_.debug_sync != 0 && !in_capture) {
    sync(st->handle, ("debug_sync after launch of " + std::string(kern->name)).c_str());
  }
}
