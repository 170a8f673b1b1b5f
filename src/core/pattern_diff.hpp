// What a report says about bytes that a count found bad: a pad or a
// quarantined buffer is counted on the device first, then read back to name
// its first bad byte. Something may rewrite the bytes between the two looks
// (metrale_redzone_poison on another thread refilling a pad): the count
// stands and the first byte is unknown, never one that no look saw.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <string>

#include "metrale_gpu.h"

namespace metrale::core {

// Of n bytes read back: how many differ from pattern, the first of them at
// *first_offset holding *first_value. None differ although the count saw
// `counted`: counted, with METRALE_REDZONE_OFFSET_UNKNOWN and 0.
inline size_t describe_difference(const uint8_t* read, size_t n, uint8_t pattern, size_t counted,
                                  size_t* first_offset, uint8_t* first_value) {
  size_t bad = 0;
  for (size_t off = 0; off < n; ++off) {
    if (read[off] == pattern) continue;
    if (bad++ == 0) {
      *first_offset = off;
      *first_value = read[off];
    }
  }
  if (bad != 0) return bad;
  *first_offset = METRALE_REDZONE_OFFSET_UNKNOWN;
  *first_value = 0;
  return counted;
}

// "the first at offset 3 past the end (expected 0xa5, found 0x5a)", where
// is " past the end" or " of the buffer"; for an unknown first, what
// happened to it.
inline std::string first_bad_text(size_t offset, const char* where, uint8_t expected,
                                  uint8_t found) {
  char bytes[48];
  if (offset == METRALE_REDZONE_OFFSET_UNKNOWN) {
    std::snprintf(bytes, sizeof bytes, "0x%02x", expected);
    return std::string("rewritten with ") + bytes +
           " before they could be read back (metrale_redzone_poison on another thread?), so "
           "the first is unknown";
  }
  std::snprintf(bytes, sizeof bytes, " (expected 0x%02x, found 0x%02x)", expected, found);
  return "the first at offset " + std::to_string(offset) + where + bytes;
}

}  // namespace metrale::core
