// How a staged copy's host side stores its bytes. A staging buffer is never
// read by the CPU (the DMA reads it, or it was just written by one), and a
// piece is megabytes: ordinary stores first read every destination line
// into the cache (a third more memory traffic, competing with the DMA for
// the same memory), where streaming (non-temporal) stores write whole lines
// past the cache. METRALE_STAGING_STORES picks one; bench_copy measures both.
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

// "streaming" or "cached" (the values METRALE_STAGING_STORES takes); false
// for anything else, *out untouched.
bool parse_store_mode(const char* text, StoreMode* out) noexcept;

// Copies with the given mode.
inline void copy_bytes(StoreMode mode, void* dst, const void* src, size_t n) noexcept {
  if (mode == StoreMode::kStreaming) {
    stream_copy(dst, src, n);
  } else if (n != 0) {
    std::memcpy(dst, src, n);
  }
}

}  // namespace metrale::core::staging
