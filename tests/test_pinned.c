/* Pinned and registered host memory: allocation, registration, the
 * is_pinned sub-range query, device pointers, and whether h2d_async waits. */
#include <stdlib.h>

#include "test_support.h"

static void alloc_and_free_pinned(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  void* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, &h));
  assert_non_null(h);
  memset(h, 0x5C, 4096); /* host memory, writable */
  int yes = 0;
  MT_OK(metrale_host_is_pinned(ctx, h, 4096, &yes));
  assert_int_equal(yes, 1);
  MT_OK(metrale_host_free_pinned(ctx, h));
  MT_OK(metrale_host_is_pinned(ctx, h, 1, &yes));
  assert_int_equal(yes, 0);
  MT_STATUS(metrale_host_free_pinned(ctx, h), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_host_free_pinned(ctx, NULL));
  mt_close(ctx);
}

static void pinned_is_not_on_ledger(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_ledger_t before = mt_ledger(ctx);
  void* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 8192, &h));
  MT_LEDGER_SAME(ctx, before);
  MT_OK(metrale_host_free_pinned(ctx, h));
  mt_close(ctx);
}

static void is_pinned_sub_ranges(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, (void**)&h));
  int yes = -1;
  MT_OK(metrale_host_is_pinned(ctx, h + 100, 200, &yes));
  assert_int_equal(yes, 1);
  MT_OK(metrale_host_is_pinned(ctx, h + 4095, 1, &yes));
  assert_int_equal(yes, 1);
  MT_OK(metrale_host_is_pinned(ctx, h + 4000, 200, &yes)); /* runs past the end */
  assert_int_equal(yes, 0);
  char stack_buf[64];
  MT_OK(metrale_host_is_pinned(ctx, stack_buf, sizeof stack_buf, &yes));
  assert_int_equal(yes, 0);
  MT_STATUS(metrale_host_is_pinned(ctx, h, 0, &yes), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_host_is_pinned(ctx, h, 16, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_host_free_pinned(ctx, h));
  mt_close(ctx);
}

static void register_and_unregister(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 3 * 4096), 0);
  char* b = buf;
  int yes = 0;
  MT_OK(metrale_host_register(ctx, b, 2 * 4096));
  MT_OK(metrale_host_is_pinned(ctx, b + 10, 4096, &yes));
  assert_int_equal(yes, 1);
  MT_OK(metrale_host_is_pinned(ctx, b + 4096, 4097, &yes)); /* one byte beyond */
  assert_int_equal(yes, 0);
  /* Overlapping an existing range is refused. */
  MT_STATUS(metrale_host_register(ctx, b + 4096, 2 * 4096), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_host_register(ctx, b, 0), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_host_register(ctx, NULL, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_host_unregister(ctx, b));
  MT_OK(metrale_host_is_pinned(ctx, b + 10, 16, &yes));
  assert_int_equal(yes, 0);
  MT_STATUS(metrale_host_unregister(ctx, b), METRALE_ERROR_NOT_FOUND);
  /* A freed-pinned pointer was never registered. */
  MT_STATUS(metrale_host_unregister(ctx, b + 4096), METRALE_ERROR_NOT_FOUND);
  free(buf);
  mt_close(ctx);
}

/* Pinning belongs to the pages, whoever pinned them (rule 7): a range
 * another context registered or allocated pinned is refused as one this
 * context pinned is (the driver refuses to register pages twice). The host
 * backend once accepted it, and each context then "owned" the pages. */
static void register_refuses_memory_another_context_pinned(void** state) {
  (void)state;
  metrale_context_t* c = mt_open(NULL);
  metrale_context_t* d = mt_open(NULL);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 2 * 4096), 0);
  char* b = buf;
  MT_OK(metrale_host_register(c, b, 2 * 4096));
  MT_STATUS(metrale_host_register(d, b, 2 * 4096), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_host_register(d, b + 4096, 16), METRALE_ERROR_INVALID_ARGUMENT);
  void* h = NULL;
  MT_OK(metrale_host_alloc_pinned(c, 4096, &h));
  MT_STATUS(metrale_host_register(d, h, 4096), METRALE_ERROR_INVALID_ARGUMENT);
  /* Nothing was recorded for d: it has nothing to unregister, and c's
   * ranges stay pinned. */
  MT_STATUS(metrale_host_unregister(d, b), METRALE_ERROR_NOT_FOUND);
  int yes = 0;
  MT_OK(metrale_host_is_pinned(c, b, 2 * 4096, &yes));
  assert_int_equal(yes, 1);
  /* Once c lets go, d may pin the pages. */
  MT_OK(metrale_host_unregister(c, b));
  MT_OK(metrale_host_register(d, b, 2 * 4096));
  MT_OK(metrale_host_unregister(d, b));
  MT_OK(metrale_host_free_pinned(c, h));
  free(buf);
  mt_close(d);
  mt_close(c);
}

static void device_pointer_of_pinned(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, (void**)&h));
  metrale_devptr_t d = 0, d_in = 0;
  MT_OK(metrale_host_device_pointer(ctx, h, &d));
  assert_true(d != 0);
  MT_OK(metrale_host_device_pointer(ctx, h + 64, &d_in));
  assert_int_equal(d_in, d + 64);
  if (mt_is_host(ctx)) assert_int_equal(d, (metrale_devptr_t)(uintptr_t)h);
  char other[16];
  metrale_devptr_t untouched = 0x77;
  MT_STATUS(metrale_host_device_pointer(ctx, other, &untouched), METRALE_ERROR_NOT_FOUND);
  assert_int_equal(untouched, 0x77);
  MT_OK(metrale_host_free_pinned(ctx, h));
  MT_STATUS(metrale_host_device_pointer(ctx, h, &d), METRALE_ERROR_NOT_FOUND);
  mt_close(ctx);
}

static void device_pointer_of_registered(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 4096), 0);
  MT_OK(metrale_host_register(ctx, buf, 4096));
  metrale_devptr_t d = 0, d_in = 0;
  MT_OK(metrale_host_device_pointer(ctx, buf, &d));
  MT_OK(metrale_host_device_pointer(ctx, (char*)buf + 100, &d_in));
  assert_int_equal(d_in, d + 100);
  MT_OK(metrale_host_unregister(ctx, buf));
  free(buf);
  mt_close(ctx);
}

/* --- h2d_async and pinned sources ---------------------------------------------- */

static void h2d_async_waits_for_pinned_source(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  unsigned char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 1024, (void**)&h));
  for (int i = 0; i < 1024; ++i) h[i] = (unsigned char)(i ^ 0x5A);
  unsigned char expect[1024];
  memcpy(expect, h, sizeof expect);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, 1024, &d));
  MT_OK(metrale_counters_reset(ctx));

  MT_OK(metrale_copy_h2d_async(ctx, h, 1024, d, s));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, 1);
  /* The call waited, so the source may change now without harm. */
  memset(h, 0, 1024);
  MT_OK(metrale_stream_synchronize(ctx, s));
  unsigned char* got = mt_read_device(ctx, d, 1024);
  assert_memory_equal(got, expect, 1024);
  free(got);

  /* Retained copies never wait. */
  MT_OK(metrale_copy_h2d_async_retained(ctx, h, 1024, d, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, 1);

  /* Pageable sources do not count. */
  unsigned char pageable[256] = {1};
  MT_OK(metrale_copy_h2d_async(ctx, pageable, sizeof pageable, d, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, 1);

  /* A second pinned-source copy waits again. */
  MT_OK(metrale_copy_h2d_async(ctx, h + 512, 512, d, NULL));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, 2);

  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_host_free_pinned(ctx, h));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void registered_source_counts_as_pinned(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  void* buf = NULL;
  assert_int_equal(posix_memalign(&buf, 4096, 4096), 0);
  memset(buf, 0x21, 4096);
  MT_OK(metrale_host_register(ctx, buf, 4096));
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, 4096, &d));
  MT_OK(metrale_counters_reset(ctx));
  MT_OK(metrale_copy_h2d_async(ctx, buf, 4096, d, NULL));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, 1);
  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_host_unregister(ctx, buf));
  free(buf);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(alloc_and_free_pinned),
      cmocka_unit_test(pinned_is_not_on_ledger),
      cmocka_unit_test(is_pinned_sub_ranges),
      cmocka_unit_test(register_and_unregister),
      cmocka_unit_test(register_refuses_memory_another_context_pinned),
      cmocka_unit_test(device_pointer_of_pinned),
      cmocka_unit_test(device_pointer_of_registered),
      cmocka_unit_test(h2d_async_waits_for_pinned_source),
      cmocka_unit_test(registered_source_counts_as_pinned),
  };
  return MT_RUN(tests);
}
