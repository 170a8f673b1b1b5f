// The test-kernel fatbin loaded twice into the same primary context: once by
// the library (module "test_kernels") and once by the raw driver, so both
// sides launch the same device code.
#pragma once

#include <cuda.h>

#include <cstdint>

#include "gpu_session.hpp"

namespace bench {

struct BenchKernels {
  metrale_kernel_t* lib_empty = nullptr;  // empty_kernel()
  metrale_kernel_t* lib_fill = nullptr;   // fill_u32(p, value, n), launched with n = 0
  CUmodule raw_module = nullptr;
  CUfunction raw_empty = nullptr;
  CUfunction raw_fill = nullptr;
  const RawDriver* api = nullptr;
  ~BenchKernels();
};

// fill_u32's packed parameters: p@0 value@8 n@16, 24 bytes.
struct FillArgs {
  uint64_t p;
  uint32_t value;
  uint32_t pad;
  uint64_t n;
};
static_assert(sizeof(FillArgs) == 24, "fill_u32 packs into 24 bytes");

// False and report.skip(what, why) when the fatbin is missing or refused.
bool load_bench_kernels(GpuSession* s, BenchKernels* k, Report* report, const std::string& what);

}  // namespace bench
