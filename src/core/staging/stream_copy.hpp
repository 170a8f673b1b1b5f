// How a staged copy's host side stores its bytes. A staging buffer is never
// read by the CPU (the DMA reads it, or it was just written by one), and a
// piece is megabytes: ordinary stores first read every destination line
// into the cache (a third more memory traffic, competing with the DMA for
// the same memory), where streaming (non-temporal) stores write whole lines
// past the cache. Measured on the H200 machine (bench_copy's sweep, both
// modes interleaved): d2h, into the caller's pageable memory, gains from
// streaming (54 vs 42-52 GB/s); h2d, into a staging buffer the DMA reads
// next, loses (34-46 vs 47-51 GB/s): the DMA finds freshly cached lines in
// the last-level cache instead of memory. So each direction has its mode;
// METRALE_STAGING_STORES overrides both.
#pragma once

#include <cstddef>
#include <cstring>

namespace metrale::core::staging {

enum class StoreMode {
  kStreaming,  // non-temporal stores where the CPU has them (x86-64), memcpy elsewhere
  kCached,     // memcpy
};

// Copies n bytes from src to dst (no overlap) with streaming stores, any
// alignment; the stores are fenced before it returns, so whoever is told
// next (a DMA enqueued after, a thread that waits) sees every byte.
void stream_copy(void* dst, const void* src, size_t n) noexcept;

// The mode of each direction of a staged copy.
struct StorePolicy {
  StoreMode h2d = StoreMode::kCached;     // pageable -> staging buffer
  StoreMode d2h = StoreMode::kStreaming;  // staging buffer -> pageable
};

// METRALE_STAGING_STORES's values: "auto" (the default policy above),
// "streaming" or "cached" (both directions); false for anything else, *out
// untouched.
bool parse_store_policy(const char* text, StorePolicy* out) noexcept;

inline const char* store_mode_name(StoreMode m) {
  return m == StoreMode::kStreaming ? "streaming" : "cached";
}

// Copies with the given mode.
inline void copy_bytes(StoreMode mode, void* dst, const void* src, size_t n) noexcept {
  if (mode == StoreMode::kStreaming) {
    stream_copy(dst, src, n);
  } else if (n != 0) {
    std::memcpy(dst, src, n);
  }
}

}  // namespace metrale::core::staging
