// Small text helpers shared by the messages of every core area.
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

namespace metrale::core {

inline std::string hex(uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%llx", static_cast<unsigned long long>(v));
  return buf;
}

// Bytes in the largest binary unit that keeps the number >= 1 ("512 B",
// "16.0 KiB", "3.5 MiB", "1.2 GiB"): small allocations must not read "0.0 MiB".
inline std::string human_bytes(uint64_t bytes) {
  static const char* const units[] = {"KiB", "MiB", "GiB", "TiB"};
  char buf[32];
  if (bytes < 1024) {
    std::snprintf(buf, sizeof buf, "%llu B", static_cast<unsigned long long>(bytes));
    return buf;
  }
  double v = static_cast<double>(bytes) / 1024.0;
  size_t u = 0;
  while (v >= 1024.0 && u + 1 < sizeof units / sizeof units[0]) {
    v /= 1024.0;
    ++u;
  }
  std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

inline std::string gib(uint64_t bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB",
                static_cast<double>(bytes) / (1024.0 * 1024.0 * 1024.0));
  return buf;
}

inline std::string site_text(const char* file, int line) {
  return std::string(file) + ":" + std::to_string(line);
}

inline std::string plural(uint64_t n, const char* word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

}  // namespace metrale::core
