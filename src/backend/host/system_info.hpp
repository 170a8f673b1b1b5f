// What the host machine says about itself: the stand-ins for a GPU's
// total/free memory, name and multiprocessor count.
#pragma once

#include <cstddef>
#include <string>

namespace metrale::backend::host {

// Physical RAM: sysconf(_SC_PHYS_PAGES) * sysconf(_SC_PAGE_SIZE).
size_t physical_memory_bytes();
// MemAvailable from /proc/meminfo; sysinfo's free RAM when that is missing.
size_t available_memory_bytes();
// "model name" from /proc/cpuinfo; "" when there is none (non-x86, no /proc).
std::string cpu_model_name();

}  // namespace metrale::backend::host
