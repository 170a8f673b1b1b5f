// Writing event-log lines: JSON pieces written through a char cursor into
// a buffer the caller sized (bound() says how much a piece can take), so a
// line costs no allocation and no snprintf. Strings are escaped for JSON;
// bytes that are not UTF-8 become U+FFFD, so every line parses.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

namespace metrale::core::event_json {

// Bytes that escaped(text) may write: 6 per input byte at most ("\u00XX").
inline size_t escaped_bound(const char* text) { return text == nullptr ? 4 : 6 * std::strlen(text) + 2; }

inline void raw(char*& p, const char* text, size_t n) {
  std::memcpy(p, text, n);
  p += n;
}

template <size_t N>
inline void lit(char*& p, const char (&text)[N]) {
  raw(p, text, N - 1);
}

// At most 20 bytes.
inline void u64(char*& p, uint64_t v) {
  char buf[20];
  char* q = buf + sizeof buf;
  do {
    *--q = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  raw(p, q, static_cast<size_t>(buf + sizeof buf - q));
}

// At most 21 bytes.
inline void i64(char*& p, int64_t v) {
  if (v < 0) {
    *p++ = '-';
    u64(p, static_cast<uint64_t>(-(v + 1)) + 1);
  } else {
    u64(p, static_cast<uint64_t>(v));
  }
}

// "0x..." with the quotes (64-bit values stay exact in JavaScript readers);
// at most 20 bytes.
inline void hex(char*& p, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char buf[20];
  char* q = buf + sizeof buf;
  *--q = '"';
  do {
    *--q = digits[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--q = 'x';
  *--q = '0';
  *--q = '"';
  raw(p, q, static_cast<size_t>(buf + sizeof buf - q));
}

inline void boolean(char*& p, bool b) {
  if (b) {
    lit(p, "true");
  } else {
    lit(p, "false");
  }
}

// The inside of a JSON string (no quotes); at most 6 bytes per input byte.
void escaped(char*& p, const char* text);

// A JSON string, or null for nullptr; escaped_bound(text) bytes at most.
inline void str(char*& p, const char* text) {
  if (text == nullptr) {
    lit(p, "null");
    return;
  }
  *p++ = '"';
  escaped(p, text);
  *p++ = '"';
}

// "file:line" as one string, or null without a file; at most
// escaped_bound(file) + 12 bytes.
inline void site(char*& p, const char* file, int line) {
  if (file == nullptr) {
    lit(p, "null");
    return;
  }
  *p++ = '"';
  escaped(p, file);
  *p++ = ':';
  i64(p, line);
  *p++ = '"';
}

}  // namespace metrale::core::event_json
