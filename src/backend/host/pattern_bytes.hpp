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
  // Eight words per branch while they all match (their differences OR-ed
  // together: one test per 64 bytes, the common case of a clean pad); a
  // group that differs is counted word by word from the values loaded.
  for (; k + 64 <= n; k += 64) {
    const uint64_t w0 = load(k), w1 = load(k + 8), w2 = load(k + 16), w3 = load(k + 24);
    const uint64_t w4 = load(k + 32), w5 = load(k + 40), w6 = load(k + 48), w7 = load(k + 56);
    if ((((w0 ^ word) | (w1 ^ word)) | ((w2 ^ word) | (w3 ^ word)) | ((w4 ^ word) | (w5 ^ word)) |
         ((w6 ^ word) | (w7 ^ word))) == 0) [[likely]] {
      continue;
    }
    for (const uint64_t w : {w0, w1, w2, w3, w4, w5, w6, w7}) count_word(w);
  }
  for (; k + 8 <= n; k += 8) {
    const uint64_t w = load(k);
    if (w != word) count_word(w);
  }
  for (; k < n; ++k) differ += __atomic_load_n(p + k, __ATOMIC_RELAXED) != byte;
  return differ;
}

}  // namespace metrale::backend::host
