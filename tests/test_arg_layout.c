/* The packing rule (include/metrale_gpu.h, "Kernel parameter layout"): each
 * parameter at its natural C alignment. Three signatures go through a
 * kernel that writes back what it received (host kernels here, the same
 * names in tests/kernels/test_kernels.cu on cuda), so a buffer unpacked at
 * other offsets than the caller packed turns a case red; a caller's layout
 * that differs from the kernel's is refused before anything runs. */
#include <stdalign.h>
#include <stdlib.h>

#include "test_support.h"

#define NOUT 6
#define SKIP_WITH(why) \
  do {                 \
    print_message("skip: %s\n", (why)); \
    skip();            \
  } while (0)

static const metrale_dim3_t ONE = {1, 1, 1};

typedef struct u16x2 {
  uint16_t v[2];
} u16x2_t;
typedef struct sv {
  uint16_t a;
  uint8_t b[2];
  float c;
} sv_t;

/* C mirrors of each parameter list: a C compiler lays a struct out by the
 * same rule, so offsetof is what the library must compute. */
struct mirror_a {
  uint8_t a;
  u16x2_t b;
  uint64_t c;
  uint64_t* out;
};
struct mirror_six {
  char a;
  double b;
  short c;
  const void* d;
  long long e;
  float f;
  uint64_t* out;
};
struct mirror_struct {
  uint8_t tag;
  sv_t s;
  uint64_t* out;
};

static const size_t A_SIZES[] = {sizeof(uint8_t), sizeof(u16x2_t), sizeof(uint64_t),
                                 sizeof(uint64_t*)};
static const size_t A_ALIGNS[] = {alignof(uint8_t), alignof(u16x2_t), alignof(uint64_t),
                                  alignof(uint64_t*)};
static const size_t SIX_SIZES[] = {sizeof(char),      sizeof(double), sizeof(short),
                                   sizeof(void*),     sizeof(long long), sizeof(float),
                                   sizeof(uint64_t*)};
static const size_t SIX_ALIGNS[] = {alignof(char),      alignof(double), alignof(short),
                                    alignof(void*),     alignof(long long), alignof(float),
                                    alignof(uint64_t*)};
static const size_t S_SIZES[] = {sizeof(uint8_t), sizeof(sv_t), sizeof(uint64_t*)};
static const size_t S_ALIGNS[] = {alignof(uint8_t), alignof(sv_t), alignof(uint64_t*)};

/* Where the C compiler puts each parameter: what a caller packs by, and
 * what nvcc gives the device kernels. */
static const size_t A_OFFSETS[] = {offsetof(struct mirror_a, a), offsetof(struct mirror_a, b),
                                   offsetof(struct mirror_a, c), offsetof(struct mirror_a, out)};
static const size_t SIX_OFFSETS[] = {
    offsetof(struct mirror_six, a), offsetof(struct mirror_six, b), offsetof(struct mirror_six, c),
    offsetof(struct mirror_six, d), offsetof(struct mirror_six, e), offsetof(struct mirror_six, f),
    offsetof(struct mirror_six, out)};
static const size_t S_OFFSETS[] = {offsetof(struct mirror_struct, tag),
                                   offsetof(struct mirror_struct, s),
                                   offsetof(struct mirror_struct, out)};

static uint64_t float_bits(float f) {
  uint32_t b;
  memcpy(&b, &f, 4);
  return b;
}
static uint64_t double_bits(double d) {
  uint64_t b;
  memcpy(&b, &d, 8);
  return b;
}

/* Host twins of the device kernels. */
#define ARG(call, i, type) (*(type const*)(call)->params[(i)])

static metrale_status_t host_u8_u16x2_u64(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = ARG(call, 3, uint64_t*);
  const u16x2_t b = ARG(call, 1, u16x2_t);
  out[0] = ARG(call, 0, uint8_t);
  out[1] = b.v[0];
  out[2] = b.v[1];
  out[3] = ARG(call, 2, uint64_t);
  return METRALE_OK;
}

static metrale_status_t host_six(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = ARG(call, 6, uint64_t*);
  out[0] = (uint64_t)(int64_t)ARG(call, 0, char);
  out[1] = double_bits(ARG(call, 1, double));
  out[2] = (uint64_t)(int64_t)ARG(call, 2, short);
  out[3] = (uint64_t)(uintptr_t)ARG(call, 3, void*);
  out[4] = (uint64_t)ARG(call, 4, long long);
  out[5] = float_bits(ARG(call, 5, float));
  return METRALE_OK;
}

static metrale_status_t host_struct(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  uint64_t* out = ARG(call, 2, uint64_t*);
  const sv_t s = ARG(call, 1, sv_t);
  out[0] = ARG(call, 0, uint8_t);
  out[1] = s.a;
  out[2] = s.b[0];
  out[3] = s.b[1];
  out[4] = float_bits(s.c);
  return METRALE_OK;
}

/* A context with module "test_kernels", the three layout kernels in it. */
static metrale_context_t* open_layout(void) {
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  if (mt_is_host(ctx)) {
    MT_OK(metrale_module_register_host_layout(ctx, MT_KERNEL_MODULE, "layout_u8_u16x2_u64",
                                              host_u8_u16x2_u64, NULL, A_SIZES, A_ALIGNS, 4));
    MT_OK(metrale_module_register_host_layout(ctx, MT_KERNEL_MODULE, "layout_six", host_six,
                                              NULL, SIX_SIZES, SIX_ALIGNS, 7));
    MT_OK(metrale_module_register_host_layout(ctx, MT_KERNEL_MODULE, "layout_struct",
                                              host_struct, NULL, S_SIZES, S_ALIGNS, 3));
  }
  return ctx;
}

/* Packs values[i] (sizes[i] bytes) at offsets[i] into buf; returns
 * args_bytes, the end of the last. */
static size_t pack(unsigned char* buf, size_t cap, const size_t* sizes, const size_t* offsets,
                   size_t n, const void* const* values) {
  const size_t bytes = offsets[n - 1] + sizes[n - 1];
  assert_true(bytes <= cap);
  memset(buf, 0xCD, cap); /* padding holds junk, as a caller's might */
  for (size_t i = 0; i < n; ++i) memcpy(buf + offsets[i], values[i], sizes[i]);
  return bytes;
}

static uint64_t* run_and_read(metrale_context_t* ctx, metrale_devptr_t out) {
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  return mt_read_device(ctx, out, NOUT * 8);
}

static void expect_out(const uint64_t* got, const uint64_t* want, size_t n, const char* how) {
  for (size_t i = 0; i < n; ++i) {
    if (got[i] != want[i]) {
      print_error("%s: out[%zu] = %#llx, want %#llx\n", how, i, (unsigned long long)got[i],
                  (unsigned long long)want[i]);
      fail();
    }
  }
}

/* Launches kernel `name` three ways (packed with the layout, packed without
 * it, params array), packed where the C compiler puts each parameter, and
 * checks what the kernel received each time. */
static void launch_three_ways(metrale_context_t* ctx, const char* name, const size_t* sizes,
                              const size_t* offsets, size_t n, const void* const* values,
                              metrale_devptr_t out, const uint64_t* want, size_t nwant) {
  metrale_kernel_t* k = mt_kernel(ctx, name);
  unsigned char buf[128];
  const size_t bytes = pack(buf, sizeof buf, sizes, offsets, n, values);
  const uint64_t zero[NOUT] = {0};

  MT_OK(metrale_copy_h2d(ctx, zero, sizeof zero, out));
  MT_OK(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, bytes, offsets, sizes, n));
  uint64_t* got = run_and_read(ctx, out);
  expect_out(got, want, nwant, "metrale_launch_packed_layout");
  free(got);

  MT_OK(metrale_copy_h2d(ctx, zero, sizeof zero, out));
  MT_OK(metrale_launch_packed(ctx, k, ONE, ONE, 0, NULL, buf, bytes));
  got = run_and_read(ctx, out);
  expect_out(got, want, nwant, "metrale_launch_packed");
  free(got);

  MT_OK(metrale_copy_h2d(ctx, zero, sizeof zero, out));
  void* params[8];
  for (size_t i = 0; i < n; ++i) params[i] = (void*)values[i];
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, NULL, params));
  got = run_and_read(ctx, out);
  expect_out(got, want, nwant, "metrale_launch");
  free(got);
}

static void rule_is_what_the_c_compiler_does(void** state) {
  (void)state;
  size_t off[8], bytes = 0;
  MT_OK(metrale_param_layout(A_SIZES, A_ALIGNS, 4, off, &bytes));
  assert_int_equal(off[0], offsetof(struct mirror_a, a));
  assert_int_equal(off[1], offsetof(struct mirror_a, b));
  assert_int_equal(off[1], 2); /* the array aligns like its element */
  assert_int_equal(off[2], offsetof(struct mirror_a, c));
  assert_int_equal(off[3], offsetof(struct mirror_a, out));
  assert_int_equal(bytes, 24);
  /* The three-parameter list on its own: 0, 2, 8; 16 bytes. */
  MT_OK(metrale_param_layout(A_SIZES, A_ALIGNS, 3, off, &bytes));
  assert_int_equal(off[1], 2);
  assert_int_equal(off[2], 8);
  assert_int_equal(bytes, 16);

  MT_OK(metrale_param_layout(SIX_SIZES, SIX_ALIGNS, 7, off, &bytes));
  assert_int_equal(off[0], offsetof(struct mirror_six, a));
  assert_int_equal(off[1], offsetof(struct mirror_six, b));
  assert_int_equal(off[2], offsetof(struct mirror_six, c));
  assert_int_equal(off[3], offsetof(struct mirror_six, d));
  assert_int_equal(off[4], offsetof(struct mirror_six, e));
  assert_int_equal(off[5], offsetof(struct mirror_six, f));
  assert_int_equal(off[6], offsetof(struct mirror_six, out));
  assert_int_equal(bytes, offsetof(struct mirror_six, out) + sizeof(void*));
  MT_OK(metrale_param_layout(SIX_SIZES, SIX_ALIGNS, 6, off, &bytes));
  assert_int_equal(bytes, 44); /* no tail padding after the float */

  MT_OK(metrale_param_layout(S_SIZES, S_ALIGNS, 3, off, &bytes));
  assert_int_equal(off[1], offsetof(struct mirror_struct, s));
  assert_int_equal(off[1], 4); /* an 8-byte struct aligned to 4 */
  assert_int_equal(off[2], offsetof(struct mirror_struct, out));
  assert_int_equal(bytes, 24);

  /* Over-aligned: a 32-byte struct aligned to 32 after one byte. */
  const size_t big_sizes[] = {1, 32}, big_aligns[] = {1, 32};
  MT_OK(metrale_param_layout(big_sizes, big_aligns, 2, off, &bytes));
  assert_int_equal(off[1], 32);
  assert_int_equal(bytes, 64);
  /* No parameters: 0 bytes, NULL arrays allowed. */
  bytes = 99;
  MT_OK(metrale_param_layout(NULL, NULL, 0, NULL, &bytes));
  assert_int_equal(bytes, 0);
}

static void u8_u16x2_u64_reaches_the_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = open_layout();
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, NOUT * 8, &out));
  const uint8_t a = 0xAB;
  const u16x2_t b = {{0x1234, 0xBEEF}};
  const uint64_t c = 0x0102030405060708ull;
  const void* values[] = {&a, &b, &c, &out};
  const uint64_t want[] = {0xAB, 0x1234, 0xBEEF, 0x0102030405060708ull};
  launch_three_ways(ctx, "layout_u8_u16x2_u64", A_SIZES, A_OFFSETS, 4, values, out, want, 4);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void six_scalars_reach_the_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = open_layout();
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, NOUT * 8, &out));
  const char a = 'Z';
  const double b = -2.5e300;
  const short c = -1234;
  const void* d = (const void*)(uintptr_t)0x1122334455667788ull; /* never dereferenced */
  const long long e = -0x0123456789ABCDEFll;
  const float f = 3.25f;
  const void* values[] = {&a, &b, &c, &d, &e, &f, &out};
  const uint64_t want[] = {(uint64_t)'Z',
                           double_bits(b),
                           (uint64_t)(int64_t)c,
                           0x1122334455667788ull,
                           (uint64_t)e,
                           float_bits(f)};
  launch_three_ways(ctx, "layout_six", SIX_SIZES, SIX_OFFSETS, 7, values, out, want, 6);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void struct_by_value_reaches_the_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = open_layout();
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, NOUT * 8, &out));
  const uint8_t tag = 0x7E;
  const sv_t s = {0xCAFE, {0x11, 0x22}, -0.75f};
  const void* values[] = {&tag, &s, &out};
  const uint64_t want[] = {0x7E, 0xCAFE, 0x11, 0x22, float_bits(-0.75f)};
  launch_three_ways(ctx, "layout_struct", S_SIZES, S_OFFSETS, 3, values, out, want, 5);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

/* The kernel's layout as known: on host from the registration, on cuda
 * from cuFuncGetParamInfo (skipped where the driver lacks it). */
static int kernel_layout(metrale_context_t* ctx, metrale_kernel_t* k, size_t* off, size_t* sz,
                         size_t cap, size_t* n) {
  metrale_status_t s = metrale_kernel_param_layout(ctx, k, off, sz, cap, n);
  if (s == METRALE_ERROR_UNSUPPORTED && !mt_is_host(ctx)) return 0;
  MT_OK(s);
  return 1;
}

static void kernel_reports_the_rule_s_layout(void** state) {
  (void)state;
  metrale_context_t* ctx = open_layout();
  metrale_kernel_t* k = mt_kernel(ctx, "layout_struct");
  size_t off[8], sz[8], n = 0;
  if (!kernel_layout(ctx, k, off, sz, 8, &n)) {
    mt_close(ctx);
    SKIP_WITH("the CUDA driver has no cuFuncGetParamInfo (older than 12.4)");
  }
  assert_int_equal(n, 3);
  size_t want[3], bytes = 0;
  MT_OK(metrale_param_layout(S_SIZES, S_ALIGNS, 3, want, &bytes));
  for (size_t i = 0; i < 3; ++i) {
    assert_int_equal(off[i], want[i]);
    assert_int_equal(sz[i], S_SIZES[i]);
  }
  k = mt_kernel(ctx, "layout_u8_u16x2_u64");
  MT_OK(metrale_kernel_param_layout(ctx, k, off, sz, 8, &n));
  assert_int_equal(n, 4);
  assert_int_equal(off[1], 2);
  assert_int_equal(off[2], 8);
  /* Size query, then a buffer too small (the first cap entries filled). */
  n = 0;
  MT_OK(metrale_kernel_param_layout(ctx, k, NULL, NULL, 0, &n));
  assert_int_equal(n, 4);
  memset(off, 0xFF, sizeof off);
  MT_STATUS(metrale_kernel_param_layout(ctx, k, off, sz, 2, &n), METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(n, 4);
  assert_int_equal(off[1], 2);
  assert_int_equal(off[2], (size_t)-1);
  MT_STATUS(metrale_kernel_param_layout(ctx, k, off, sz, 8, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_kernel_param_layout(ctx, k, NULL, sz, 8, &n), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_kernel_param_layout(ctx, NULL, off, sz, 8, &n),
            METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

/* A buffer packed by another rule (the array at 4, where the largest power
 * of two dividing its size would put it) is refused, naming the parameter,
 * and nothing runs. */
static void other_offsets_are_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = open_layout();
  metrale_kernel_t* k = mt_kernel(ctx, "layout_u8_u16x2_u64");
  size_t n = 0;
  if (!kernel_layout(ctx, k, NULL, NULL, 0, &n)) {
    mt_close(ctx);
    SKIP_WITH("the CUDA driver has no cuFuncGetParamInfo (older than 12.4)");
  }
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, NOUT * 8, &out));
  const uint64_t marks[NOUT] = {7, 7, 7, 7, 7, 7};
  MT_OK(metrale_copy_h2d(ctx, marks, sizeof marks, out));
  MT_OK(metrale_launch_trace_enable(ctx, 1));
  const metrale_counters_t before = mt_counters(ctx);
  unsigned char buf[24] = {0};
  memcpy(buf + 16, &out, 8);

  const size_t wrong_off[] = {0, 4, 8, 16};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, wrong_off, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1");
  MT_MESSAGE_HAS("expects offset 2");
  MT_MESSAGE_HAS("gave offset 4");
  MT_MESSAGE_HAS("layout_u8_u16x2_u64");
  /* A 4-byte value where the kernel takes 8. */
  const size_t right_off[] = {0, 2, 8, 16};
  const size_t short_sizes[] = {1, 4, 4, 8};
  const size_t short_off[] = {0, 2, 8, 12};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 20, short_off,
                                         short_sizes, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 2");
  /* One parameter too few. */
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 16, right_off, A_SIZES, 3),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("takes 4 parameters");

  const metrale_counters_t after = mt_counters(ctx);
  assert_int_equal(after.launches, before.launches);
  size_t traced = 0;
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &traced));
  assert_int_equal(traced, 0);
  uint64_t* got = run_and_read(ctx, out);
  for (int i = 0; i < NOUT; ++i) assert_int_equal(got[i], 7);
  free(got);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

/* The sizes-only registration keeps its documented inference (the array at
 * 4); a caller packing by the rule is then told, not fed wrong values. */
static void sizes_only_registration_is_caught_not_misread(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  MT_OK(metrale_module_register_host_params(ctx, "old", "f", host_u8_u16x2_u64, NULL, A_SIZES, 4));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "old", "f", &k));
  size_t off[4], sz[4], n = 0;
  MT_OK(metrale_kernel_param_layout(ctx, k, off, sz, 4, &n));
  assert_int_equal(off[1], 4);
  assert_int_equal(off[2], 8);
  unsigned char buf[24] = {0};
  size_t natural[4], bytes = 0;
  MT_OK(metrale_param_layout(A_SIZES, A_ALIGNS, 4, natural, &bytes));
  assert_int_equal(bytes, 24); /* same size: only the offsets tell */
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, natural, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1: the kernel expects offset 4");
  mt_close(ctx);
}

/* Reads the packed buffer by the rule's offsets itself: registered without
 * sizes, it gets only args/args_bytes. */
static metrale_status_t host_raw(const metrale_host_kernel_call_t* call, void* user) {
  uint64_t* seen = user;
  if (call->params != NULL || call->args_bytes != 24) return METRALE_ERROR_INTERNAL;
  const unsigned char* p = call->args;
  uint16_t v1;
  memcpy(&v1, p + 4, 2);
  seen[0] = p[0];
  memcpy(&seen[1], p + 2, 2);
  seen[2] = v1;
  memcpy(&seen[3], p + 8, 8);
  return METRALE_OK;
}

static void unknown_layout_takes_the_caller_s(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  uint64_t seen[4] = {0};
  MT_OK(metrale_module_register_host(ctx, "raw", "f", host_raw, seen));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "raw", "f", &k));
  size_t n = 0;
  MT_STATUS(metrale_kernel_param_layout(ctx, k, NULL, NULL, 0, &n), METRALE_ERROR_UNSUPPORTED);
  MT_MESSAGE_HAS("unknown");
  const uint8_t a = 9;
  const u16x2_t b = {{0x0A0B, 0x0C0D}};
  const uint64_t c = 42;
  const uint64_t fake_out = 0;
  const void* values[] = {&a, &b, &c, &fake_out};
  unsigned char buf[32];
  const size_t* off = A_OFFSETS;
  const size_t bytes = pack(buf, sizeof buf, A_SIZES, off, 4, values);
  MT_OK(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, bytes, off, A_SIZES, 4));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  assert_int_equal(seen[0], 9);
  assert_int_equal(seen[1], 0x0A0B);
  assert_int_equal(seen[2], 0x0C0D);
  assert_int_equal(seen[3], 42);
  /* The caller's own layout must still hold together. */
  const size_t overlap[] = {0, 0, 8, 16};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, overlap, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1 is at offset 0");
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 32, off, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("end at 24 but args_bytes is 32");
  const size_t past[] = {0, 2, 8, 20}, wrap[] = {0, 2, 8, SIZE_MAX - 3};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, past, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("ends past args_bytes 24");
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, wrap, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 3");
  const size_t zero_sizes[] = {1, 0, 8, 8};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, off, zero_sizes, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1 has size 0");
  /* A layout that holds together launches as it is. */
  MT_OK(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, off, A_SIZES, 4));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  mt_close(ctx);
}

/* A parameter aligned to 32 reaches a host kernel at a 32-aligned address,
 * at every launch and replay. */
typedef struct wide {
  alignas(32) double v[4];
} wide_t;

static metrale_status_t host_wide(const metrale_host_kernel_call_t* call, void* user) {
  int* ok = user;
  if (((uintptr_t)call->params[1] % 32) != 0) return METRALE_ERROR_INTERNAL;
  const wide_t w = ARG(call, 1, wide_t);
  *ok += (ARG(call, 0, uint8_t) == 5 && w.v[0] == 1.0 && w.v[3] == 4.0) ? 1 : 100;
  return METRALE_OK;
}

static void over_aligned_parameter_is_aligned_for_the_host_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  int ok = 0;
  const size_t sizes[] = {1, sizeof(wide_t)}, aligns[] = {1, alignof(wide_t)};
  MT_OK(metrale_module_register_host_layout(ctx, "wide", "f", host_wide, &ok, sizes, aligns, 2));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "wide", "f", &k));
  const uint8_t a = 5;
  const wide_t w = {{1.0, 2.0, 3.0, 4.0}};
  void* params[] = {(void*)&a, (void*)&w};
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, s, params));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, s, params));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  for (int i = 0; i < 3; ++i) MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(ok, 4);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void bad_layouts_are_refused(void** state) {
  (void)state;
  size_t off[4] = {77, 77, 77, 77}, bytes = 77;
  const size_t sizes[] = {1, 4, 8}, aligns[] = {1, 2, 8};
  MT_STATUS(metrale_param_layout(NULL, aligns, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_param_layout(sizes, NULL, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_param_layout(sizes, aligns, 3, NULL, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  const size_t zero[] = {1, 0, 8}, huge[] = {1, 4097, 8}, max[] = {1, SIZE_MAX, 8};
  MT_STATUS(metrale_param_layout(zero, aligns, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1 has size 0");
  MT_STATUS(metrale_param_layout(huge, aligns, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_param_layout(max, aligns, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  const size_t a0[] = {1, 0, 8}, a3[] = {1, 3, 8}, a4[] = {1, 2, 16}, amax[] = {1, 2, SIZE_MAX};
  MT_STATUS(metrale_param_layout(sizes, a0, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 1 has alignment 0");
  MT_STATUS(metrale_param_layout(sizes, a3, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_param_layout(sizes, a4, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 2 has alignment 16 for size 8");
  MT_STATUS(metrale_param_layout(sizes, amax, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  /* Swapped arrays: sizes 1, 2, 8 with alignments 1, 4, 8. */
  MT_STATUS(metrale_param_layout(aligns, sizes, 3, off, &bytes), METRALE_ERROR_INVALID_ARGUMENT);
  for (int i = 0; i < 4; ++i) assert_int_equal(off[i], 77);
  assert_int_equal(bytes, 77);
  MT_OK(metrale_param_layout(sizes, aligns, 3, off, NULL)); /* args_bytes is optional */

  metrale_context_t* ctx = open_layout();
  const metrale_host_kernel_fn fn = host_struct;
  if (mt_is_host(ctx)) {
    MT_STATUS(metrale_module_register_host_layout(ctx, "bad", "f", fn, NULL, sizes, a3, 3),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("bad::f");
    MT_MESSAGE_HAS("parameter 1");
    MT_STATUS(metrale_module_register_host_layout(ctx, "bad", "f", fn, NULL, sizes, NULL, 3),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_STATUS(metrale_module_register_host_layout(ctx, "bad", "f", fn, NULL, NULL, aligns, 3),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_STATUS(metrale_module_register_host_layout(ctx, "bad", "f", NULL, NULL, sizes, aligns, 3),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_STATUS(metrale_module_register_host_layout(NULL, "bad", "f", fn, NULL, sizes, aligns, 3),
              METRALE_ERROR_INVALID_ARGUMENT);
    assert_int_equal(metrale_has_module(ctx, "bad"), 0); /* a refused call adds nothing */
    MT_OK(metrale_module_register_host_layout(ctx, "none", "f", fn, NULL, NULL, NULL, 0));
  } else {
    MT_STATUS(metrale_module_register_host_layout(ctx, "bad", "f", fn, NULL, sizes, aligns, 3),
              METRALE_ERROR_UNSUPPORTED);
  }

  metrale_kernel_t* k = mt_kernel(ctx, "layout_u8_u16x2_u64");
  unsigned char buf[24] = {0};
  const size_t ok_off[] = {0, 2, 8, 16};
  const size_t desc[] = {0, 8, 2, 16}, past[] = {0, 2, 8, 20}, wrap[] = {0, 2, 8, SIZE_MAX - 3};
  const metrale_counters_t before = mt_counters(ctx);
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, NULL, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, ok_off, NULL, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, desc, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, past, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("parameter 3");
  /* The kernel's offsets, but a buffer longer than its parameters. */
  unsigned char longer[32] = {0};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, longer, 32, ok_off, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("end at 24 but args_bytes is 32");
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, buf, 24, wrap, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed_layout(ctx, k, ONE, ONE, 0, NULL, NULL, 24, ok_off, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed_layout(ctx, NULL, ONE, ONE, 0, NULL, buf, 24, ok_off, A_SIZES, 4),
            METRALE_ERROR_INVALID_ARGUMENT);
  const metrale_dim3_t zero_grid = {0, 1, 1};
  MT_STATUS(metrale_launch_packed_layout(ctx, k, zero_grid, ONE, 0, NULL, buf, 24, ok_off, A_SIZES,
                                         4),
            METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mt_counters(ctx).launches, before.launches);
  mt_close(ctx);
}

static void backend_names(void** state) {
  (void)state;
  assert_string_equal(metrale_backend_name(METRALE_BACKEND_AUTO), "METRALE_BACKEND_AUTO");
  assert_string_equal(metrale_backend_name(METRALE_BACKEND_CUDA), "METRALE_BACKEND_CUDA");
  assert_string_equal(metrale_backend_name(METRALE_BACKEND_HOST), "METRALE_BACKEND_HOST");
  assert_string_equal(metrale_backend_name((metrale_backend_t)3), "METRALE_UNKNOWN_BACKEND");
  assert_string_equal(metrale_backend_name((metrale_backend_t)-1), "METRALE_UNKNOWN_BACKEND");
  metrale_context_t* ctx = mt_open(NULL);
  assert_string_equal(metrale_backend_name(metrale_context_backend(ctx)),
                      mt_is_host(ctx) ? "METRALE_BACKEND_HOST" : "METRALE_BACKEND_CUDA");
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(rule_is_what_the_c_compiler_does),
      cmocka_unit_test(u8_u16x2_u64_reaches_the_kernel),
      cmocka_unit_test(six_scalars_reach_the_kernel),
      cmocka_unit_test(struct_by_value_reaches_the_kernel),
      cmocka_unit_test(kernel_reports_the_rule_s_layout),
      cmocka_unit_test(other_offsets_are_refused),
      cmocka_unit_test(sizes_only_registration_is_caught_not_misread),
      cmocka_unit_test(unknown_layout_takes_the_caller_s),
      cmocka_unit_test(over_aligned_parameter_is_aligned_for_the_host_kernel),
      cmocka_unit_test(bad_layouts_are_refused),
      cmocka_unit_test(backend_names),
  };
  return MT_RUN(tests);
}
