// The host backend's red-zone byte loops (host_copies.cpp, host_pad_check.cpp).
#pragma once

#include <cstddef>
#include <cstdint>

namespace metrale::backend::host {

// Pads may be filled (poison) on one thread while another scans them, as
// two kernels may on a GPU: each byte is one relaxed atomic access, so the
// two see each byte old or new, and neither is a C++ data race.
inline void store_bytes(uint8_t* p, uint8_t byte, size_t n) {
  for (size_t k = 0; k < n; ++k) __atomic_store_n(p + k, byte, __ATOMIC_RELAXED);
}
inline uint64_t count_other(const uint8_t* p, uint8_t byte, size_t n) {
  uint64_t differ = 0;
  size_t k = 0;
  // Byte by byte up to an 8-byte boundary, then words: words equal to the
  // pattern (the common case: checks of clean pads) cost a compare; only a
  // word that differs is counted byte by byte. Relaxed
  // atomic loads throughout, as before: a stream's work may write meanwhile.
  for (; k < n && (reinterpret_cast<uintptr_t>(p + k) & 7) != 0; ++k)
    differ += __atomic_load_n(p + k, __ATOMIC_RELAXED) != byte;
  const uint64_t word = 0x0101010101010101ull * byte;
  const auto load = [&](size_t at) {
    return __atomic_load_n(reinterpret_cast<const uint64_t*>(p + at), __ATOMIC_RELAXED);
  };
  const auto count_word = [&](uint64_t w) {
    for (int j = 0; j < 8; ++j) differ += static_cast<uint8_t>(w >> (8 * j)) != byte;
  };
  // Four words per branch while they all match; a group that differs is
  // counted word by word from the values already loaded.
  for (; k + 32 <= n; k += 32) {
    const uint64_t w0 = load(k), w1 = load(k + 8), w2 = load(k + 16), w3 = load(k + 24);
    if (((w0 ^ word) | (w1 ^ word) | (w2 ^ word) | (w3 ^ word)) == 0) continue;
    count_word(w0);
    count_word(w1);
    count_word(w2);
    count_word(w3);
  }
  for (; k + 8 <= n; k += 8) {
    const uint64_t w = load(k);
    if (w != word) count_word(w);
  }
  for (; k < n; ++k) differ += __atomic_load_n(p + k, __ATOMIC_RELAXED) != byte;
  return differ;
}

}  // namespace metrale::backend::host
