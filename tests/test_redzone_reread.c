/* Reports of bytes that changed back between the two looks: a pad or a
 * quarantined buffer is counted first and read back after, to name its
 * first bad byte. When the read finds the pattern again (a
 * metrale_redzone_poison on another thread refilled the pad in between),
 * the count stands and the first byte is METRALE_REDZONE_OFFSET_UNKNOWN,
 * found 0, never a byte no look saw. The host backend's test hook
 * METRALE_TEST_HOST_REFILL_COUNTED refills every range it counts bad, so
 * the suite runs on the host backend only. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

#define PAD 64

/* A padded context whose backend refills what it counts bad; NULL (skip)
 * off the host backend, or when needs_pool and the pool is off. */
static metrale_context_t* open_refilling(size_t quarantine, int needs_pool) {
  if (mt_backend() != METRALE_BACKEND_HOST) {
    print_message("skip: needs METRALE_TEST_HOST_REFILL_COUNTED, a host-backend test hook\n");
    return NULL;
  }
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  o.quarantine_bytes = quarantine;
  setenv("METRALE_TEST_HOST_REFILL_COUNTED", "1", 1);
  setenv("METRALE_REDZONE_VERIFY_ORDERED", "0", 1);  /* the count-then-read check */
  setenv("METRALE_REDZONE_VERIFY_BATCH", "1", 1);    /* at each free */
  metrale_context_t* ctx = mt_open(&o);
  unsetenv("METRALE_TEST_HOST_REFILL_COUNTED");
  unsetenv("METRALE_REDZONE_VERIFY_ORDERED");
  unsetenv("METRALE_REDZONE_VERIFY_BATCH");
  if (needs_pool && !mt_pool_on(ctx)) {
    mt_close(ctx);
    return NULL;
  }
  return ctx;
}

/* Host backend: a device pointer is a host address. */
static void poke(metrale_devptr_t at) { *(unsigned char*)(uintptr_t)at = 0x5a; }

static void a_live_pad_refilled_before_its_read_back(void** state) {
  (void)state;
  metrale_context_t* ctx = open_refilling(0, 0);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 100, &p));
  poke(p + 100 + 3);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("1 bad bytes, rewritten with 0xa5 before they could be read back");
  MT_MESSAGE_HAS("the first is unknown");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].bad_bytes, 1);
  assert_true(v[0].first_bad_offset == METRALE_REDZONE_OFFSET_UNKNOWN);
  assert_int_equal(v[0].found, 0);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void a_freed_pad_refilled_before_its_read_back(void** state) {
  (void)state;
  metrale_context_t* ctx = open_refilling(0, 1);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 100, &p));
  poke(p + 100 + 5);
  mt_keep_errors();
  MT_OK(metrale_free(ctx, p)); /* checked at once */
  mt_stop_keeping_errors();
  assert_non_null(strstr(mt_errors(), "before its free"));
  assert_non_null(strstr(mt_errors(), "the first is unknown"));
  assert_null(strstr(mt_errors(), "found 0x00"));
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].bad_bytes, 1);
  assert_true(v[0].first_bad_offset == METRALE_REDZONE_OFFSET_UNKNOWN);
  assert_int_equal(v[0].found, 0);
  mt_close(ctx);
}

static void a_quarantined_buffer_changed_back_before_its_read_back(void** state) {
  (void)state;
  metrale_context_t* ctx = open_refilling(1u << 20, 0);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 256, &p));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  poke(p + 7);
  metrale_use_after_free_t u[2];
  size_t n = 0;
  MT_STATUS(metrale_quarantine_scan(ctx, u, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("1 bytes changed, rewritten with 0xd7");
  assert_int_equal(n, 1);
  assert_int_equal(u[0].ptr, p);
  assert_int_equal(u[0].bad_bytes, 1);
  assert_true(u[0].first_bad_offset == METRALE_REDZONE_OFFSET_UNKNOWN);
  assert_int_equal(u[0].found, 0);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_live_pad_refilled_before_its_read_back),
      cmocka_unit_test(a_freed_pad_refilled_before_its_read_back),
      cmocka_unit_test(a_quarantined_buffer_changed_back_before_its_read_back),
  };
  return MT_RUN(tests);
}
