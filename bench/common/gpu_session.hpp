// What every GPU bench program starts with: the raw driver on the device's
// primary context, a library context on the cuda backend over the same
// primary context, and the device's name and driver version in the report.
#pragma once

#include <cuda.h>

#include <string>

#include "bench_json.hpp"
#include "metrale_gpu.h"
#include "raw_driver.hpp"

namespace bench {

struct GpuSession {
  RawDriver api{};
  CUdevice dev = 0;
  CUstream raw_stream = nullptr;  // non-blocking, like the library's default stream
  metrale_context_t* ctx = nullptr;
  metrale_stream_t* lib_stream = nullptr;  // the context's default stream
  ~GpuSession();
};

// Opens both sides. False (and report.skip(what, why)) when there is no
// driver or device; the caller writes the report and exits 0.
bool open_gpu_session(GpuSession* s, Report* report, const std::string& what);

// A library context on the cuda backend with the given options changed from
// the defaults; nullptr and a noted failure when it cannot be made.
metrale_context_t* make_cuda_context(size_t redzone_bytes, int checked_pointers);

// Helpers for batch bodies: false and a noted failure on a non-OK status.
bool lib_ok(metrale_status_t st, const char* call);
bool raw_ok(const RawDriver& api, CUresult rc, const char* call);

// The test-kernel fatbin: $METRALE_BENCH_KERNELS, else the path built in.
std::string kernels_path();

// "1 MiB", "256 B": for ids and tables.
std::string size_label(size_t bytes);

}  // namespace bench
