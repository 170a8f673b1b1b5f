// Device code for the test suites, built by nvcc into test_kernels.fatbin and
// loaded by the tests as module "test_kernels". Host-backend tests register C
// functions under the same names with the same parameter sizes, so names,
// parameter types and their order here are a contract (tests/COMMON rules):
// change them on both sides or not at all.
#include <stdint.h>

extern "C" __global__ void fill_u32(uint32_t* p, uint32_t value, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = value;
}

extern "C" __global__ void add_f32(const float* a, const float* b, float* c, uint64_t n) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n;
       i += (uint64_t)gridDim.x * blockDim.x)
    c[i] = a[i] + b[i];
}

// A planted bug for the red-zone tests: writes `extra` bytes past the end of
// a `bytes`-long buffer.
extern "C" __global__ void overflow_write(uint8_t* p, uint64_t bytes, uint64_t extra,
                                          uint32_t value) {
  const uint64_t end = bytes + extra;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < end;
       i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = (uint8_t)value;
}

// A planted fault for the sticky-fault tests: a store to an address no
// allocation holds (e.g. 0x10) raises CUDA_ERROR_ILLEGAL_ADDRESS.
extern "C" __global__ void illegal_write(uint64_t addr) {
  *(volatile uint32_t*)addr = 0xdeadbeefu;
}

// Every parameter kind, to check launch packing: the packed layout is
// a@0 b@2 c@4 d@8 e@16 f@24 g@32 out@40, 48 bytes.
extern "C" __global__ void mixed_params(uint8_t a, uint16_t b, uint32_t c, uint64_t d, float e,
                                        double f, int8_t g, uint64_t* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  const double e_wide = (double)e;
  out[0] = a;
  out[1] = b;
  out[2] = c;
  out[3] = d;
  out[4] = (uint64_t)__double_as_longlong(e_wide);
  out[5] = (uint64_t)__double_as_longlong(f);
  out[6] = (uint64_t)(int64_t)g;
}

extern "C" __global__ void empty_kernel() {}
