/* Red zones: pads after buffers, planted overflows found by a scan with
 * their site and first bad byte, poison repairs, min index, off. */
#include <stdlib.h>

#include "test_support.h"

#define PAD 64
#define BYTES 100
#define BAD 0x11u

static metrale_context_t* open_padded(size_t pad, uint64_t min_index) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = pad;
  o.redzone_min_index = min_index;
  return mt_open(&o);
}

static size_t scan_count(metrale_context_t* ctx, metrale_status_t want) {
  size_t n = 12345;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), want);
  return n;
}

/* --- layout ---------------------------------------------------------------- */

static void options_set_the_pad(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  assert_int_equal(a.redzone_bytes, PAD);
  assert_int_equal(a.bytes, BYTES); /* the pad is not counted as asked bytes */
  assert_int_equal(mt_ledger(ctx).bytes, BYTES);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_sets_the_pad(void** state) {
  (void)state;
  setenv("METRALE_REDZONE", "128", 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* ctx = NULL;
  metrale_status_t s = metrale_context_create(&o, &ctx);
  unsetenv("METRALE_REDZONE");
  if (s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) skip();
  MT_STATUS(s, METRALE_OK);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  assert_int_equal(a.redzone_bytes, 128);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void pad_follows_the_buffer(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  unsigned char* all = mt_read_device(ctx, p, BYTES + PAD);
  for (int i = BYTES; i < BYTES + PAD; ++i) assert_int_equal(all[i], METRALE_REDZONE_PATTERN);
  free(all);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void clean_pads_scan_ok(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  assert_int_equal(scan_count(ctx, METRALE_OK), 0);
  /* Writing the whole buffer and not a byte more is fine. */
  MT_OK(mt_overflow_write(ctx, p, BYTES, 0, BAD));
  assert_int_equal(scan_count(ctx, METRALE_OK), 0);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* --- planted overflows ------------------------------------------------------- */

static void expect_one_violation(metrale_context_t* ctx, metrale_devptr_t p, int line,
                                 size_t first_bad, size_t bad_bytes, uint8_t found) {
  metrale_redzone_violation_t v[2];
  memset(v, 0, sizeof v);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("overflow_site.c");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].bytes, BYTES);
  assert_int_equal(v[0].seq, 0);
  assert_non_null(v[0].file);
  assert_string_equal(v[0].file, "overflow_site.c");
  assert_int_equal(v[0].line, line);
  assert_int_equal(v[0].first_bad_offset, first_bad);
  assert_int_equal(v[0].bad_bytes, bad_bytes);
  assert_int_equal(v[0].expected, METRALE_REDZONE_PATTERN);
  assert_int_equal(v[0].found, found);
}

static void planted_overflow(size_t extra) {
  metrale_context_t* ctx = open_padded(PAD, 0);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, BYTES, "overflow_site.c", 77, &p));
  MT_OK(mt_overflow_write(ctx, p, BYTES, extra, BAD));
  expect_one_violation(ctx, p, 77, 0, extra, BAD);
  /* A scan does not repair: the same answer again. */
  expect_one_violation(ctx, p, 77, 0, extra, BAD);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  assert_int_equal(scan_count(ctx, METRALE_OK), 0);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void overflow_of_one_byte(void** state) {
  (void)state;
  planted_overflow(1);
}

static void overflow_of_middle_size(void** state) {
  (void)state;
  planted_overflow(17);
}

static void overflow_of_whole_pad(void** state) {
  (void)state;
  planted_overflow(PAD);
}

static void overflow_written_through_host_pointer(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  mt_require_host(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, BYTES, "overflow_site.c", 88, &p));
  unsigned char* h = (unsigned char*)(uintptr_t)p;
  h[BYTES + 5] = 0x00;
  expect_one_violation(ctx, p, 88, 5, 1, 0x00);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void overflow_by_copy_into_pad(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, BYTES, "overflow_site.c", 99, &p));
  const unsigned char junk[3] = {0x42, 0x42, 0x42};
  MT_OK(metrale_copy_h2d(ctx, junk, 3, p + BYTES + 10));
  expect_one_violation(ctx, p, 99, 10, 3, 0x42);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void violations_oldest_first_and_cap(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  metrale_devptr_t p[3];
  const unsigned char junk = 0x33;
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc_at(ctx, BYTES, "multi_site.c", 10 + i, &p[i]));
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p[2] + BYTES));
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p[0] + BYTES + 2));
  metrale_redzone_violation_t v[1];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 1, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 2);
  assert_int_equal(v[0].ptr, p[0]);
  assert_int_equal(v[0].line, 10);
  assert_int_equal(v[0].first_bad_offset, 2);

  /* Poison only seq 0: seq 2 is still overwritten. */
  MT_OK(metrale_redzone_poison(ctx, 0, 1));
  MT_STATUS(metrale_redzone_scan(ctx, v, 1, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p[2]);
  assert_int_equal(v[0].seq, 2);
  /* An empty range repairs nothing. */
  MT_OK(metrale_redzone_poison(ctx, 2, 2));
  assert_int_equal(scan_count(ctx, METRALE_ERROR_REDZONE_CORRUPTED), 1);
  MT_OK(metrale_redzone_poison(ctx, 2, 3));
  assert_int_equal(scan_count(ctx, METRALE_OK), 0);
  for (int i = 0; i < 3; ++i) MT_OK(metrale_free(ctx, p[i]));
  mt_close(ctx);
}

static void freed_allocation_leaves_the_scan(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  const unsigned char junk = 0x00;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + BYTES));
  assert_int_equal(scan_count(ctx, METRALE_ERROR_REDZONE_CORRUPTED), 1);
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(scan_count(ctx, METRALE_OK), 0);
  mt_close(ctx);
}

static void poison_lo_above_hi_is_invalid(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 0);
  MT_STATUS(metrale_redzone_poison(ctx, 5, 4), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

/* --- min index and off -------------------------------------------------------- */

static void min_index_is_respected(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(PAD, 2);
  metrale_devptr_t p[4];
  for (int i = 0; i < 4; ++i) MT_OK(metrale_alloc(ctx, BYTES, &p[i]));
  metrale_allocation_t a[4];
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, a, 4, &n));
  assert_int_equal(n, 4);
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(a[i].seq, (uint64_t)i);
    assert_int_equal(a[i].redzone_bytes, i < 2 ? 0 : PAD);
  }
  const unsigned char junk = 0x00;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p[3] + BYTES));
  metrale_redzone_violation_t v;
  MT_STATUS(metrale_redzone_scan(ctx, &v, 1, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v.seq, 3);
  for (int i = 0; i < 4; ++i) MT_OK(metrale_free(ctx, p[i]));
  mt_close(ctx);
}

static void off_scans_ok_with_zero(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(0, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  assert_int_equal(a.redzone_bytes, 0);
  metrale_redzone_violation_t v[2];
  n = 77;
  MT_OK(metrale_redzone_scan(ctx, v, 2, &n));
  assert_int_equal(n, 0);
  MT_OK(metrale_redzone_poison(ctx, 0, 10));
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(options_set_the_pad),
      cmocka_unit_test(env_sets_the_pad),
      cmocka_unit_test(pad_follows_the_buffer),
      cmocka_unit_test(clean_pads_scan_ok),
      cmocka_unit_test(overflow_of_one_byte),
      cmocka_unit_test(overflow_of_middle_size),
      cmocka_unit_test(overflow_of_whole_pad),
      cmocka_unit_test(overflow_written_through_host_pointer),
      cmocka_unit_test(overflow_by_copy_into_pad),
      cmocka_unit_test(violations_oldest_first_and_cap),
      cmocka_unit_test(freed_allocation_leaves_the_scan),
      cmocka_unit_test(poison_lo_above_hi_is_invalid),
      cmocka_unit_test(min_index_is_respected),
      cmocka_unit_test(off_scans_ok_with_zero),
  };
  return MT_RUN(tests);
}
