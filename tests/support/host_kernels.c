/* C equivalents of tests/kernels/test_kernels.cu for the host backend: same
 * names, same parameter sizes, so a test launches them the same way on both
 * backends. Each is called once per launch and covers every index itself, as
 * the grid-stride device kernels do. */
#include <string.h>

#include "host_kernels.h"

#define ARG(call, i, type) (*(type*)(call)->params[(i)])

static metrale_status_t fill_u32(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint32_t* p = ARG(call, 0, uint32_t*);
  uint32_t value = ARG(call, 1, uint32_t);
  uint64_t n = ARG(call, 2, uint64_t);
  for (uint64_t i = 0; i < n; ++i) p[i] = value;
  return METRALE_OK;
}

static metrale_status_t add_f32(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  const float* a = ARG(call, 0, const float*);
  const float* b = ARG(call, 1, const float*);
  float* c = ARG(call, 2, float*);
  uint64_t n = ARG(call, 3, uint64_t);
  for (uint64_t i = 0; i < n; ++i) c[i] = a[i] + b[i];
  return METRALE_OK;
}

static metrale_status_t overflow_write(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint8_t* p = ARG(call, 0, uint8_t*);
  uint64_t bytes = ARG(call, 1, uint64_t);
  uint64_t extra = ARG(call, 2, uint64_t);
  uint32_t value = ARG(call, 3, uint32_t);
  memset(p, (int)(uint8_t)value, (size_t)(bytes + extra));
  return METRALE_OK;
}

/* On a GPU this write faults the context; here it says so without writing. */
static metrale_status_t illegal_write(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_ERROR_CONTEXT_LOST;
}

static metrale_status_t mixed_params(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint8_t a = ARG(call, 0, uint8_t);
  uint16_t b = ARG(call, 1, uint16_t);
  uint32_t c = ARG(call, 2, uint32_t);
  uint64_t d = ARG(call, 3, uint64_t);
  float e = ARG(call, 4, float);
  double f = ARG(call, 5, double);
  int8_t g = ARG(call, 6, int8_t);
  uint64_t* out = ARG(call, 7, uint64_t*);
  double e_wide = (double)e;
  out[0] = a;
  out[1] = b;
  out[2] = c;
  out[3] = d;
  memcpy(&out[4], &e_wide, 8);
  memcpy(&out[5], &f, 8);
  out[6] = (uint64_t)(int64_t)g;
  return METRALE_OK;
}

static metrale_status_t empty_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_OK;
}

/* The host backend runs stream work at once: no stream is ever ahead of
 * another, so the gate has nothing to hold back. */
static metrale_status_t spin_ns(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_OK;
}

metrale_status_t mt_register_host_kernels(metrale_context_t* ctx, const char* module) {
  static const size_t fill_sizes[] = {8, 4, 8};
  static const size_t add_sizes[] = {8, 8, 8, 8};
  static const size_t overflow_sizes[] = {8, 8, 8, 4};
  static const size_t illegal_sizes[] = {8};
  static const size_t spin_sizes[] = {8};
  static const size_t mixed_sizes[] = {1, 2, 4, 8, 4, 8, 1, 8};
  static const size_t no_sizes[1] = {0}; /* a kernel without parameters */
  struct {
    const char* name;
    metrale_host_kernel_fn fn;
    const size_t* sizes;
    size_t n;
  } table[] = {
      {"fill_u32", fill_u32, fill_sizes, 3},
      {"add_f32", add_f32, add_sizes, 4},
      {"overflow_write", overflow_write, overflow_sizes, 4},
      {"illegal_write", illegal_write, illegal_sizes, 1},
      {"mixed_params", mixed_params, mixed_sizes, 8},
      {"empty_kernel", empty_kernel, no_sizes, 0},
      {"spin_ns", spin_ns, spin_sizes, 1},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    metrale_status_t s = metrale_module_register_host_params(ctx, module, table[i].name,
                                                             table[i].fn, NULL, table[i].sizes,
                                                             table[i].n);
    if (s != METRALE_OK) return s;
  }
  return METRALE_OK;
}
