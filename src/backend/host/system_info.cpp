#include "backend/host/system_info.hpp"

#include <sys/sysinfo.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>
#include <fstream>

namespace metrale::backend::host {

size_t physical_memory_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_size = sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page_size <= 0) {
    struct sysinfo si;
    if (sysinfo(&si) == 0) return static_cast<size_t>(si.totalram) * si.mem_unit;
    return 0;
  }
  return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
}

size_t available_memory_bytes() {
  if (FILE* f = std::fopen("/proc/meminfo", "r")) {
    char line[256];
    unsigned long long kib = 0;
    bool found = false;
    while (std::fgets(line, sizeof line, f)) {
      if (std::sscanf(line, "MemAvailable: %llu kB", &kib) == 1) {
        found = true;
        break;
      }
    }
    std::fclose(f);
    if (found) return static_cast<size_t>(kib) * 1024;
  }
  struct sysinfo si;
  if (sysinfo(&si) == 0) return static_cast<size_t>(si.freeram) * si.mem_unit;
  return 0;
}

std::string cpu_model_name() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line)) {
    if (line.compare(0, 10, "model name") != 0) continue;
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    size_t begin = line.find_first_not_of(" \t", colon + 1);
    if (begin == std::string::npos) return std::string();
    size_t end = line.find_last_not_of(" \t\r");
    return line.substr(begin, end - begin + 1);
  }
  return std::string();
}

}  // namespace metrale::backend::host
