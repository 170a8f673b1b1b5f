#include "core/telemetry.hpp"

#include "core/log.hpp"

namespace metrale::core {

void log_ring_drop(const char* what) noexcept {
  try {
    log().warn("the {} has no memory to grow: an entry was dropped, and later drops are not "
               "logged (the call it recorded succeeded)",
               what);
  } catch (...) {
    // No memory for the line either.
  }
}

void Counters::snapshot(metrale_counters_t* out) const {
  auto get = [](const std::atomic<uint64_t>& c) { return c.load(std::memory_order_relaxed); };
  out->launches = launches.load();
  out->graph_launches = get(graph_launches);
  out->stream_syncs = get(stream_syncs);
  out->h2d_copies = get(h2d_copies);
  out->h2d_bytes = get(h2d_bytes);
  out->d2h_copies = get(d2h_copies);
  out->d2h_bytes = get(d2h_bytes);
  out->d2d_copies = get(d2d_copies);
  out->d2d_bytes = get(d2d_bytes);
  out->memsets = get(memsets);
  out->memset_bytes = get(memset_bytes);
  out->allocs = get(allocs);
  out->alloc_bytes = get(alloc_bytes);
  out->frees = get(frees);
  out->free_bytes = get(free_bytes);
  out->kernel_lookups = get(kernel_lookups);
  out->kernel_lookup_misses = get(kernel_lookup_misses);
  out->pinned_source_waits = get(pinned_source_waits);
  out->timings_dropped = get(timings_dropped);
}

void Counters::reset() {
  launches.reset();
  for (auto* c : {&graph_launches, &stream_syncs, &h2d_copies, &h2d_bytes, &d2h_copies,
                  &d2h_bytes, &d2d_copies, &d2d_bytes, &memsets, &memset_bytes, &allocs,
                  &alloc_bytes, &frees, &free_bytes, &kernel_lookups, &kernel_lookup_misses,
                  &pinned_source_waits, &timings_dropped}) {
    c->store(0, std::memory_order_relaxed);
  }
}

}  // namespace metrale::core
