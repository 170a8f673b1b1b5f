// The process-wide view of the ledgers: every live context's allocations
// grouped by device (backend and ordinal) and site (issue 13).
#pragma once

#include <cstddef>

#include "metrale_gpu.h"

namespace metrale::core {

// metrale_alloc_report_all: the text, *needed its size with the NUL.
void process_alloc_report(size_t top_n, size_t min_mib, char* buf, size_t buflen,
                          size_t* needed);
// metrale_device_live: live bytes and allocations of every live context on
// (backend, device); 0 and 0 when none.
void device_live(metrale_backend_t backend, int device, size_t* bytes, size_t* count);

}  // namespace metrale::core
