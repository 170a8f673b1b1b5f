// Streaming copy (see stream_copy.hpp). SSE2 is part of x86-64, so no
// run-time dispatch: 16-byte unaligned loads, aligned non-temporal stores,
// four per 64-byte line; the unaligned head and the tail go through memcpy.
#include "core/staging/stream_copy.hpp"

#include <cstdint>
#include <cstring>

#if defined(__x86_64__)
#include <emmintrin.h>
#endif

namespace metrale::core::staging {

void stream_copy(void* dst, const void* src, size_t n) noexcept {
#if defined(__x86_64__)
  auto* d = static_cast<unsigned char*>(dst);
  const auto* s = static_cast<const unsigned char*>(src);
  // Below a few lines the fence costs more than streaming saves.
  constexpr size_t kLine = 64;
  if (n < 4 * kLine) {
    if (n != 0) std::memcpy(d, s, n);
    return;
  }
  const size_t head = (kLine - (reinterpret_cast<uintptr_t>(d) & (kLine - 1))) & (kLine - 1);
  std::memcpy(d, s, head);
  d += head;
  s += head;
  n -= head;
  const size_t lines = n / kLine;
  for (size_t i = 0; i < lines; ++i) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(d), a);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 16), b);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 32), c);
    _mm_stream_si128(reinterpret_cast<__m128i*>(d + 48), e);
    d += kLine;
    s += kLine;
  }
  n -= lines * kLine;
  if (n != 0) std::memcpy(d, s, n);
  // Non-temporal stores are weakly ordered: fence them before anyone is
  // told the copy is done.
  _mm_sfence();
#else
  if (n != 0) std::memcpy(dst, src, n);
#endif
}

bool parse_store_policy(const char* text, StorePolicy* out) noexcept {
  if (text == nullptr) return false;
  if (std::strcmp(text, "auto") == 0) {
    *out = StorePolicy{};
    return true;
  }
  StoreMode m;
  if (std::strcmp(text, "streaming") == 0) {
    m = StoreMode::kStreaming;
  } else if (std::strcmp(text, "cached") == 0) {
    m = StoreMode::kCached;
  } else {
    return false;
  }
  *out = StorePolicy{m, m, m};
  return true;
}

}  // namespace metrale::core::staging
