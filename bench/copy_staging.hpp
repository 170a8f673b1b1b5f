// The pageable-copy rows of bench_copy (issue 10 item 4: pinned staging):
// 1 GiB pageable h2d/d2h through the library with staging on (defaults) and
// off, next to the raw driver from the same pageable buffer and from a
// pinned one; pageable copies from 64 KiB to 16 MiB with staging at the
// defaults, off, and on for every size; and a sweep of ring and thread
// settings at 1 GiB from which the defaults are chosen. Without a GPU the
// same rows run on the host backend at smaller sizes (no raw rows): a check
// that the bench works, not a figure to compare.
#pragma once

#include <cuda.h>

#include <cstddef>

#include "bench_json.hpp"
#include "metrale_gpu.h"
#include "raw_driver.hpp"

namespace bench {

struct PageableSetup {
  Report* report = nullptr;
  metrale_backend_t backend = METRALE_BACKEND_CUDA;  // of every library context
  const RawDriver* api = nullptr;  // nullptr: no raw rows (host backend)
  CUstream raw_stream = nullptr;
  CUdeviceptr raw_dev = 0;         // >= big bytes, for the raw rows
  unsigned char* pageable = nullptr;  // >= big bytes, pages faulted in
  unsigned char* pinned = nullptr;    // >= big bytes, or nullptr
  size_t big = size_t{1} << 30;
};

// copy_{h2d,d2h}_<big>_pageable/{library, library_unstaged, raw_async_sync,
// raw_pinned_async_sync}.
void pageable_big_rows(const PageableSetup& s);
// copy_{h2d,d2h}_<size>_pageable/{library, library_unstaged, library_staged,
// raw_async_sync} for 64 KiB .. 16 MiB.
void pageable_size_rows(const PageableSetup& s);
// copy_{h2d,d2h}_<big>_pageable/library_b<buffers>_<MiB>MiB_t<threads>.
void staging_sweep_rows(const PageableSetup& s);

// Without a GPU: the rows above on the host backend, big = 64 MiB.
void host_pageable_rows(Report* report);

}  // namespace bench
