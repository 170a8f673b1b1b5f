/* Every copy and memset variant with its data checked, the pitched 2D copy,
 * 0-byte no-ops and checked pointers. */
#include <stdlib.h>

#include "test_support.h"

#define N 1024

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s;
  metrale_devptr_t a, b;
  unsigned char pattern[N];
} fixture_t;

static void fixture_open(fixture_t* f, const metrale_context_options_t* opts) {
  f->ctx = mt_open(opts);
  MT_OK(metrale_stream_create(f->ctx, &f->s));
  MT_OK(metrale_alloc(f->ctx, N, &f->a));
  MT_OK(metrale_alloc(f->ctx, N, &f->b));
  for (int i = 0; i < N; ++i) f->pattern[i] = (unsigned char)(i * 13 + 1);
}

static void fixture_close(fixture_t* f) {
  MT_OK(metrale_free(f->ctx, f->a));
  MT_OK(metrale_free(f->ctx, f->b));
  MT_OK(metrale_stream_destroy(f->ctx, f->s));
  mt_close(f->ctx);
}

static void expect_device(fixture_t* f, metrale_devptr_t p, const void* want, size_t bytes) {
  void* got = mt_read_device(f->ctx, p, bytes);
  assert_memory_equal(got, want, bytes);
  free(got);
}

/* --- synchronous ------------------------------------------------------------- */

static void h2d_then_d2h(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_copy_h2d(f.ctx, f.pattern, N, f.a));
  unsigned char out[N] = {0};
  MT_OK(metrale_copy_d2h(f.ctx, f.a, out, N));
  assert_memory_equal(out, f.pattern, N);
  /* Partial, at an offset. */
  unsigned char part[100] = {0};
  MT_OK(metrale_copy_d2h(f.ctx, f.a + 300, part, 100));
  assert_memory_equal(part, f.pattern + 300, 100);
  fixture_close(&f);
}

static void d2h_on_stream_waits(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_copy_h2d_async_retained(f.ctx, f.pattern, N, f.a, f.s));
  unsigned char out[N] = {0};
  MT_OK(metrale_copy_d2h_on_stream(f.ctx, f.a, out, N, f.s));
  assert_memory_equal(out, f.pattern, N);
  fixture_close(&f);
}

static void d2h_async_after_sync(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_copy_h2d(f.ctx, f.pattern, N, f.a));
  unsigned char out[N] = {0};
  MT_OK(metrale_copy_d2h_async(f.ctx, f.a, out, N, f.s));
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  assert_memory_equal(out, f.pattern, N);
  fixture_close(&f);
}

static void d2d_sync_and_async(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_copy_h2d(f.ctx, f.pattern, N, f.a));
  MT_OK(metrale_copy_d2d(f.ctx, f.a, f.b, N));
  expect_device(&f, f.b, f.pattern, N);
  MT_OK(metrale_memset(f.ctx, f.b, 0, N));
  MT_OK(metrale_copy_d2d_async(f.ctx, f.a + 10, f.b + 20, 500, f.s));
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  unsigned char want[N];
  memset(want, 0, N);
  memcpy(want + 20, f.pattern + 10, 500);
  expect_device(&f, f.b, want, N);
  fixture_close(&f);
}

static void h2d_async_and_retained(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  unsigned char src[N];
  memcpy(src, f.pattern, N);
  MT_OK(metrale_copy_h2d_async(f.ctx, src, N, f.a, f.s));
  /* src is pageable: the caller may reuse it on return. */
  memset(src, 0xEE, N);
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  expect_device(&f, f.a, f.pattern, N);
  MT_OK(metrale_copy_h2d_async_retained(f.ctx, src, N, f.b, NULL));
  MT_OK(metrale_stream_synchronize(f.ctx, NULL));
  expect_device(&f, f.b, src, N);
  fixture_close(&f);
}

static void memset_sync_and_async(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  unsigned char want[N];
  MT_OK(metrale_memset(f.ctx, f.a, 0x3C, N));
  memset(want, 0x3C, N);
  expect_device(&f, f.a, want, N);
  MT_OK(metrale_memset_async(f.ctx, f.a + 100, 0xC3, 50, f.s));
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  memset(want + 100, 0xC3, 50);
  expect_device(&f, f.a, want, N);
  fixture_close(&f);
}

/* --- 2D ------------------------------------------------------------------------- */

static void pitched_2d_copy(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  enum { SRC_PITCH = 64, DST_PITCH = 48, WIDTH = 40, HEIGHT = 6 };
  MT_OK(metrale_copy_h2d(f.ctx, f.pattern, SRC_PITCH * HEIGHT, f.a));
  MT_OK(metrale_memset(f.ctx, f.b, 0xEE, N));
  MT_OK(metrale_copy_d2d_2d_async(f.ctx, f.a, SRC_PITCH, f.b, DST_PITCH, WIDTH, HEIGHT, f.s));
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  unsigned char want[N];
  memset(want, 0xEE, N);
  for (int r = 0; r < HEIGHT; ++r)
    memcpy(want + r * DST_PITCH, f.pattern + r * SRC_PITCH, WIDTH);
  expect_device(&f, f.b, want, N); /* the gaps between rows are untouched */
  fixture_close(&f);
}

static void pitch_below_width_is_invalid(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_memset(f.ctx, f.b, 0x01, N));
  MT_STATUS(metrale_copy_d2d_2d_async(f.ctx, f.a, 16, f.b, 64, 32, 4, f.s),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2d_2d_async(f.ctx, f.a, 64, f.b, 16, 32, 4, f.s),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  unsigned char want[N];
  memset(want, 0x01, N);
  expect_device(&f, f.b, want, N);
  fixture_close(&f);
}

/* --- zero bytes ----------------------------------------------------------------- */

static void zero_byte_copies_are_no_ops(void** state) {
  (void)state;
  fixture_t f;
  fixture_open(&f, NULL);
  MT_OK(metrale_memset(f.ctx, f.a, 0x44, N));
  MT_OK(metrale_memset(f.ctx, f.b, 0x55, N));
  MT_OK(metrale_counters_reset(f.ctx));
  unsigned char host[16];
  memset(host, 0x66, sizeof host);
  MT_OK(metrale_copy_h2d(f.ctx, host, 0, f.a));
  MT_OK(metrale_copy_d2h(f.ctx, f.a, host, 0));
  MT_OK(metrale_copy_d2h_on_stream(f.ctx, f.a, host, 0, f.s));
  MT_OK(metrale_copy_d2h_async(f.ctx, f.a, host, 0, f.s));
  MT_OK(metrale_copy_d2d(f.ctx, f.a, f.b, 0));
  MT_OK(metrale_copy_h2d_async(f.ctx, host, 0, f.a, f.s));
  MT_OK(metrale_copy_h2d_async_retained(f.ctx, host, 0, f.a, f.s));
  MT_OK(metrale_copy_d2d_async(f.ctx, f.a, f.b, 0, f.s));
  MT_OK(metrale_copy_d2d_2d_async(f.ctx, f.a, 64, f.b, 64, 0, 4, f.s));
  MT_OK(metrale_copy_d2d_2d_async(f.ctx, f.a, 64, f.b, 64, 32, 0, f.s));
  MT_OK(metrale_memset(f.ctx, f.a, 0, 0));
  MT_OK(metrale_memset_async(f.ctx, f.a, 0, 0, f.s));
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));
  unsigned char want[N];
  memset(want, 0x44, N);
  expect_device(&f, f.a, want, N);
  memset(want, 0x55, N);
  expect_device(&f, f.b, want, N);
  for (int i = 0; i < 16; ++i) assert_int_equal(host[i], 0x66);
  fixture_close(&f);
}

/* --- checked pointers ---------------------------------------------------------- */

static void checked_pointers_refuse_out_of_bounds(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  o.redzone_bytes = 256; /* makes the bytes past each buffer safe to hit if a check fails */
  fixture_t f;
  fixture_open(&f, &o);
  MT_OK(metrale_memset(f.ctx, f.a, 0x10, N));
  MT_OK(metrale_memset(f.ctx, f.b, 0x20, N));
  unsigned char host[N + 64];
  memset(host, 0x99, sizeof host);
  metrale_devptr_t end_a = f.a + N - 8; /* 8 bytes in, then past the end */

  MT_STATUS(metrale_copy_h2d(f.ctx, host, 16, end_a), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_h2d(f.ctx, host, N + 1, f.a), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2h(f.ctx, end_a, host, 16), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2h_on_stream(f.ctx, end_a, host, 16, f.s), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2h_async(f.ctx, end_a, host, 16, f.s), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2d(f.ctx, f.a, f.b + 8, N), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2d(f.ctx, end_a, f.b, 16), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_h2d_async(f.ctx, host, 16, end_a, f.s), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_h2d_async_retained(f.ctx, host, 16, end_a, f.s),
            METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2d_async(f.ctx, f.a, end_a + 0, 16, f.s), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2d_2d_async(f.ctx, f.a, 128, f.b, 128, 64, 9, f.s),
            METRALE_ERROR_OUT_OF_BOUNDS); /* 9 rows of 128 = 1152 > N */
  MT_STATUS(metrale_memset(f.ctx, end_a, 0, 16), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_memset_async(f.ctx, end_a, 0, 16, f.s), METRALE_ERROR_OUT_OF_BOUNDS);
  /* Nowhere near an allocation. */
  MT_STATUS(metrale_memset(f.ctx, f.a + (1u << 30), 0, 4), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_stream_synchronize(f.ctx, f.s));

  /* Not a byte moved. */
  unsigned char want[N];
  memset(want, 0x10, N);
  expect_device(&f, f.a, want, N);
  memset(want, 0x20, N);
  expect_device(&f, f.b, want, N);
  for (size_t i = 0; i < sizeof host; ++i) assert_int_equal(host[i], 0x99);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(f.ctx, NULL, 0, &n));
  assert_int_equal(n, 0);

  /* In bounds still works, including the last byte and arena memory. */
  MT_OK(metrale_copy_h2d(f.ctx, host, 8, end_a));
  metrale_devptr_t arena = 0;
  MT_OK(metrale_alloc_arena(f.ctx, 512, &arena));
  MT_OK(metrale_copy_d2d(f.ctx, f.a, arena, 512));
  MT_STATUS(metrale_copy_d2d(f.ctx, f.a, arena + 8, 512), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_free_arena(f.ctx, arena));
  /* A freed arena is out of bounds again. */
  MT_STATUS(metrale_memset(f.ctx, arena, 0, 4), METRALE_ERROR_OUT_OF_BOUNDS);
  fixture_close(&f);
}

static void checked_pointers_refuse_freed_memory(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  metrale_context_t* ctx = mt_open(&o);
  metrale_devptr_t p = 0, keep = 0;
  MT_OK(metrale_alloc(ctx, 64, &keep)); /* keeps the host backend's memory mapped around p */
  MT_OK(metrale_alloc(ctx, 64, &p));
  MT_OK(metrale_free(ctx, p));
  unsigned char host[64] = {0};
  MT_STATUS(metrale_copy_d2h(ctx, p, host, 64), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_free(ctx, keep));
  mt_close(ctx);
}

/* Every copy, memset and 2D copy whose range runs past a live allocation is
 * OUT_OF_BOUNDS, its message names that allocation (address, size and the
 * site it was made at), and nothing moved: the destination, the red zones and
 * the host buffer are as they were. */
#define OOB_CASE(expr, site)                                       \
  do {                                                             \
    MT_STATUS((expr), METRALE_ERROR_OUT_OF_BOUNDS);                \
    MT_MESSAGE_HAS(site);                                          \
    MT_MESSAGE_HAS("past the end");                                \
  } while (0)

static void checked_pointers_name_the_allocation_and_move_nothing(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  o.redzone_bytes = 256; /* a failed check would land in a pad, and the scan would say so */
  metrale_context_t* ctx = mt_open(&o);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_at(ctx, N, "oob_site_a.c", 101, &a));
  MT_OK(metrale_alloc_at(ctx, N, "oob_site_b.c", 202, &b));
  MT_OK(metrale_memset(ctx, a, 0x10, N));
  MT_OK(metrale_memset(ctx, b, 0x20, N));
  unsigned char host[2 * N];
  memset(host, 0x99, sizeof host);
  const metrale_devptr_t a_tail = a + N - 8, b_tail = b + N - 8; /* 8 bytes in, 8 past */
  const char* A = "oob_site_a.c:101";
  const char* B = "oob_site_b.c:202";

  OOB_CASE(metrale_copy_h2d(ctx, host, 16, a_tail), A);
  OOB_CASE(metrale_copy_h2d_async(ctx, host, 16, a_tail, s), A);
  OOB_CASE(metrale_copy_h2d_async_retained(ctx, host, 16, a_tail, s), A);
  OOB_CASE(metrale_copy_d2h(ctx, a_tail, host, 16), A);
  OOB_CASE(metrale_copy_d2h_on_stream(ctx, a_tail, host, 16, s), A);
  OOB_CASE(metrale_copy_d2h_async(ctx, a_tail, host, 16, s), A);
  /* d2d: a bad source, then a bad destination, each naming its own buffer. */
  OOB_CASE(metrale_copy_d2d(ctx, a_tail, b, 16), A);
  OOB_CASE(metrale_copy_d2d(ctx, a, b_tail, 16), B);
  OOB_CASE(metrale_copy_d2d_async(ctx, a_tail, b, 16, s), A);
  OOB_CASE(metrale_copy_d2d_async(ctx, a, b_tail, 16, s), B);
  OOB_CASE(metrale_copy_d2d(ctx, a, b, N + 1), A);
  /* 2D: 8 rows of 64 bytes at a pitch of 128 span 960 bytes; from +128 they
   * run 64 bytes past the end. */
  OOB_CASE(metrale_copy_d2d_2d_async(ctx, a + 128, 128, b, 128, 64, 8, s), A);
  OOB_CASE(metrale_copy_d2d_2d_async(ctx, a, 128, b + 128, 128, 64, 8, s), B);
  OOB_CASE(metrale_copy_d2d_2d_async(ctx, a, 128, b, 138, 64, 8, s), B); /* 7*138+64 = 1030 */
  OOB_CASE(metrale_memset(ctx, b_tail, 0, 16), B);
  OOB_CASE(metrale_memset_async(ctx, b_tail, 0, 16, s), B);
  OOB_CASE(metrale_memset(ctx, b, 0, N + 1), B);
  /* A range so long that ptr + bytes wraps around the address space. */
  MT_STATUS(metrale_memset(ctx, a + 8, 0, SIZE_MAX - 4), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2d(ctx, a, b + 8, SIZE_MAX), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_stream_synchronize(ctx, s));

  unsigned char want[N];
  memset(want, 0x10, N);
  void* got = mt_read_device(ctx, a, N);
  assert_memory_equal(got, want, N);
  free(got);
  memset(want, 0x20, N);
  got = mt_read_device(ctx, b, N);
  assert_memory_equal(got, want, N);
  free(got);
  for (size_t i = 0; i < sizeof host; ++i) assert_int_equal(host[i], 0x99);
  size_t n = 1;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);

  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* A range in no allocation names the closest one and how far away it is. On
 * the host backend every block has a gap after it, so one byte before b is
 * closer to b than to anything else. */
static void checked_pointers_name_the_closest_allocation(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_require_host(ctx);
  metrale_devptr_t b = 0;
  MT_OK(metrale_alloc_at(ctx, 64, "closest_site.c", 7, &b));
  unsigned char host[16];
  memset(host, 0x5c, sizeof host);
  MT_STATUS(metrale_copy_d2h(ctx, b - 1, host, 1), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_MESSAGE_HAS("closest_site.c:7");
  MT_MESSAGE_HAS("1 bytes before its start");
  MT_STATUS(metrale_memset(ctx, b + 64 + 3, 0, 1), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_MESSAGE_HAS("closest_site.c:7");
  MT_MESSAGE_HAS("3 bytes past its end");
  for (size_t i = 0; i < sizeof host; ++i) assert_int_equal(host[i], 0x5c);
  MT_OK(metrale_free(ctx, b));
  MT_STATUS(metrale_memset(ctx, b, 0, 1), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_MESSAGE_HAS("none is live");
  mt_close(ctx);
}

static void host_backend_refuses_foreign_ranges(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  unsigned char host[16] = {0};
  /* Checks off: the host backend still refuses memory it never handed out. */
  MT_STATUS(metrale_copy_h2d(ctx, host, 16, 0x10), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2h(ctx, 0x10, host, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_memset(ctx, 0x10, 0, 16), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(h2d_then_d2h),
      cmocka_unit_test(d2h_on_stream_waits),
      cmocka_unit_test(d2h_async_after_sync),
      cmocka_unit_test(d2d_sync_and_async),
      cmocka_unit_test(h2d_async_and_retained),
      cmocka_unit_test(memset_sync_and_async),
      cmocka_unit_test(pitched_2d_copy),
      cmocka_unit_test(pitch_below_width_is_invalid),
      cmocka_unit_test(zero_byte_copies_are_no_ops),
      cmocka_unit_test(checked_pointers_refuse_out_of_bounds),
      cmocka_unit_test(checked_pointers_refuse_freed_memory),
      cmocka_unit_test(checked_pointers_name_the_allocation_and_move_nothing),
      cmocka_unit_test(checked_pointers_name_the_closest_allocation),
      cmocka_unit_test(host_backend_refuses_foreign_ranges),
  };
  return MT_RUN(tests);
}
