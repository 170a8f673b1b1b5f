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

// A gate for the stream-order tests: keeps its stream busy for `ns`
// nanoseconds of the GPU's global timer, so work queued behind it lands
// that much later than work queued on other streams meanwhile.
extern "C" __global__ void spin_ns(uint64_t ns) {
  uint64_t start, now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
  do {
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  } while (now - start < ns);
}

// The packing rule (include/metrale_gpu.h, "Kernel parameter layout"):
// each kernel writes back what it received, so a buffer packed at other
// offsets than nvcc's shows as wrong values. tests/test_arg_layout.c and
// the Rust and Go arg-layout tests register host kernels of the same names
// and layouts; out gets one uint64_t per value, floats as their bits.
struct layout_u16x2 {
  uint16_t v[2];
};
struct layout_sv {
  uint16_t a;
  uint8_t b[2];
  float c;
};

// (u8, u16[2], u64, out): offsets 0, 2, 8, 16; 24 bytes.
extern "C" __global__ void layout_u8_u16x2_u64(uint8_t a, layout_u16x2 b, uint64_t c,
                                               uint64_t* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = a;
  out[1] = b.v[0];
  out[2] = b.v[1];
  out[3] = c;
}

// (char, double, short, pointer, long long, float, out): offsets 0, 8, 16,
// 24, 32, 40, 48; 56 bytes.
extern "C" __global__ void layout_six(char a, double b, short c, const void* d, long long e,
                                      float f, uint64_t* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = (uint64_t)(int64_t)a;
  out[1] = (uint64_t)__double_as_longlong(b);
  out[2] = (uint64_t)(int64_t)c;
  out[3] = (uint64_t)d;
  out[4] = (uint64_t)e;
  out[5] = (uint64_t)__float_as_uint(f);
}

// (u8, struct sv by value, out): offsets 0, 4, 16; 24 bytes.
extern "C" __global__ void layout_struct(uint8_t tag, layout_sv s, uint64_t* out) {
  if (blockIdx.x != 0 || threadIdx.x != 0) return;
  out[0] = tag;
  out[1] = s.a;
  out[2] = s.b[0];
  out[3] = s.b[1];
  out[4] = (uint64_t)__float_as_uint(s.c);
}
