/* Each overrun is reported by a scan once, and none is lost: a scan that
 * fails keeps the findings it took for the next one; poison neither makes a
 * freed pad's overrun come back nor erases one nobody has reported; a scan
 * made on seeing a check's error line (from the log callback) finds it. */
#include "freed_pads.h"

/* A scan refused with CAPTURE (a live pad is dirty while the default
 * stream captures) had taken the findings of the frees' checks, and they
 * were lost: no later scan listed A. */
static void a_failed_scan_keeps_the_checks_findings(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, "1", NULL, NULL); /* checked at each free */
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "a_site.c", 1, &a));
  smash(ctx, a, 1000, 0);
  MT_OK(metrale_free(ctx, a)); /* its check finds it: listed for the next scan */
  MT_OK(metrale_alloc_at(ctx, 1000, "b_site.c", 2, &b));
  smash(ctx, b, 1000, 0);
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_CAPTURE);
  MT_OK(metrale_graph_abort_capture(ctx, NULL));
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 2);
  assert_string_equal(v[0].file, "a_site.c");
  assert_string_equal(v[1].file, "b_site.c");
  /* Reported once: the live pad stays dirty, the freed one is done. */
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_string_equal(v[0].file, "b_site.c");
  MT_OK(metrale_free(ctx, b));
  mt_close(ctx);
}

/* Poison repairs live pads only: a freed block's pad, reported by a scan
 * while it was live, is not refilled, so its free's check must stay quiet
 * about the same bytes after the poison too. */
static void poison_does_not_report_a_freed_overrun_again(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, NULL, NULL, NULL); /* the default batch */
  if (ctx == NULL) skip();
  metrale_devptr_t x = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "x_site.c", 1, &x));
  smash(ctx, x, 1000, 5);
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  MT_OK(metrale_free(ctx, x)); /* waits for its check */
  assert_int_equal(stats(ctx).pads_pending, 1);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  start_capture();
  MT_OK(metrale_redzone_scan(ctx, v, 4, &n));
  stop_capture();
  assert_int_equal(n, 0);
  assert_int_equal(g_lines, 0);
  mt_close(ctx);
}

/* METRALE_REDZONE_REUSE: owner 2 got owner 1's block with the pad
 * unchecked. Poisoning owner 2's seq must not erase what owner 1 left in
 * the shared pad before any scan saw it: the free's check names both. */
static void poison_keeps_an_earlier_owners_unreported_overrun(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, NULL, NULL, "4");
  if (ctx == NULL) skip();
  metrale_devptr_t p1 = 0, p2 = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "owner1.c", 1, &p1));
  smash(ctx, p1, 1000, 3);
  MT_OK(metrale_free(ctx, p1));
  MT_OK(metrale_alloc_at(ctx, 1000, "owner2.c", 2, &p2));
  assert_int_equal(p2, p1); /* the same block, its pad shared unchecked */
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  metrale_allocation_t live[1];
  MT_OK(metrale_live_allocations(ctx, live, 1, &n));
  assert_int_equal(n, 1);
  const uint64_t seq2 = live[0].seq;
  MT_OK(metrale_redzone_poison(ctx, seq2, seq2 + 1));
  MT_OK(metrale_free(ctx, p2));
  start_capture();
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  stop_capture();
  assert_int_equal(n, 1);
  assert_int_equal(v[0].first_bad_offset, 3);
  assert_non_null(strstr(g_logged, "owner1.c:1"));
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  mt_close(ctx);
}

/* A log callback that scans on the check's error line: the finding is
 * listed before the line is logged, so this scan reports it. */
static metrale_context_t* g_ctx;
static metrale_status_t g_scan_status;
static size_t g_scan_count;
static void scan_on_the_line(metrale_log_level_t level, const char* msg, void* user) {
  (void)user;
  if (g_ctx == NULL || level < METRALE_LOG_ERROR || strstr(msg, "before its free") == NULL)
    return;
  metrale_context_t* ctx = g_ctx;
  g_ctx = NULL; /* once */
  metrale_redzone_violation_t v[2];
  g_scan_status = metrale_redzone_scan(ctx, v, 2, &g_scan_count);
}

static void a_scan_from_the_checks_log_line_finds_it(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, "1", NULL, NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "a_site.c", 1, &a));
  smash(ctx, a, 1000, 0);
  g_ctx = ctx;
  g_scan_status = METRALE_OK;
  g_scan_count = 0;
  MT_OK(metrale_log_set_callback(scan_on_the_line, NULL));
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_null(g_ctx); /* the callback ran */
  assert_int_equal(g_scan_status, METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(g_scan_count, 1);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, v, 2, &n)); /* reported once */
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_failed_scan_keeps_the_checks_findings),
      cmocka_unit_test(poison_does_not_report_a_freed_overrun_again),
      cmocka_unit_test(poison_keeps_an_earlier_owners_unreported_overrun),
      cmocka_unit_test(a_scan_from_the_checks_log_line_finds_it),
  };
  return MT_RUN(tests);
}
