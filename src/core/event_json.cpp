#include "core/event_json.hpp"

namespace metrale::core::event_json {
namespace {

// Length of the valid UTF-8 sequence at p (0: not valid UTF-8).
size_t utf8_len(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 && c < 0xf0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || n > left) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
  }
  if (n == 3 && c == 0xe0 && p[1] < 0xa0) return 0;   // overlong
  if (n == 3 && c == 0xed && p[1] >= 0xa0) return 0;  // surrogate
  if (n == 4 && c == 0xf0 && p[1] < 0x90) return 0;   // overlong
  if (n == 4 && c == 0xf4 && p[1] >= 0x90) return 0;  // past U+10FFFF
  return n;
}

}  // namespace

void escaped(char*& out, const char* text) {
  static const char digits[] = "0123456789abcdef";
  const auto* p = reinterpret_cast<const unsigned char*>(text);
  const auto* end = p + std::strlen(text);
  while (p < end) {
    // A run of plain ASCII in one copy.
    const unsigned char* run = p;
    while (p < end && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ++p;
    if (p > run) raw(out, reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
    if (p == end) break;
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      *out++ = '\\';
      *out++ = static_cast<char>(c);
      ++p;
    } else if (c < 0x20 || c == 0x7f) {
      lit(out, "\\u00");
      *out++ = digits[c >> 4];
      *out++ = digits[c & 0xf];
      ++p;
    } else if (const size_t n = utf8_len(p, static_cast<size_t>(end - p))) {
      raw(out, reinterpret_cast<const char*>(p), n);
      p += n;
    } else {
      lit(out, "\\ufffd");  // 6 bytes for 1: within the bound
      ++p;
    }
  }
}

}  // namespace metrale::core::event_json
