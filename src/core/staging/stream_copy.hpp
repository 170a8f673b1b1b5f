// How a staged copy's host side stores its bytes. A staging buffer is never
// read by the CPU (the DMA reads it, or it was just written by one), and a
// piece is megabytes: ordinary stores first read every destination line
// into the cache (a third more memory traffic, competing with the DMA for
// the same memory), where streaming (non-temporal) stores write whole lines
// past the cache. Measured on the H200 machine (bench_copy, both modes in
// one session, bench/results/2026-12-04-staging-stores-nvidia-h200.md):
// d2h, into the caller's pageable memory, gains from streaming at every
// size; h2d gains from it up to 64 MiB (8 MiB: 30 vs 12-19 GB/s; 64 MiB:
// 42 vs 32-37) and loses from 256 MiB (256 MiB and 1 GiB: 38-40 vs 42-47),
// where the source no longer sits in the last-level cache and the DMA finds
// the freshly cached staging lines there instead of in memory. So "auto"
// streams d2h, and h2d below kH2dCachedFrom; METRALE_STAGING_STORES
// "streaming" or "cached" sets every copy of both directions.
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

// "auto" caches the stores of h2d copies of this many bytes and more.
constexpr size_t kH2dCachedFrom = size_t{128} << 20;

// The mode of each direction of a staged copy, by the copy's size.
struct StorePolicy {
  StoreMode h2d_below = StoreMode::kStreaming;  // pageable -> staging, < kH2dCachedFrom
  StoreMode h2d_from = StoreMode::kCached;      // pageable -> staging, >= kH2dCachedFrom
  StoreMode d2h_all = StoreMode::kStreaming;    // staging -> pageable, any size

  StoreMode h2d(size_t bytes) const { return bytes < kH2dCachedFrom ? h2d_below : h2d_from; }
  StoreMode d2h(size_t) const { return d2h_all; }
  bool operator==(const StorePolicy& o) const {
    return h2d_below == o.h2d_below && h2d_from == o.h2d_from && d2h_all == o.d2h_all;
  }
};

// METRALE_STAGING_STORES's values: "auto" (the default policy above),
// "streaming" or "cached" (every size, both directions); false for
// anything else, *out untouched.
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
