/* Red zones on pooled blocks at metrale_context_destroy: every padded block
 * freed before the destroy has its pad checked and an overrun logged with
 * the site that allocated it and the site that freed it, also a block whose
 * free a capture still open at the destroy had deferred (rule 9), and a
 * block the sweep freed, which names the sweep as its freeing site, and a
 * block still in the quarantine. */
#include "freed_pads.h"

/* A capture left open at the destroy: the block freed on the capturing
 * stream waited for the capture's end, which the destroy brings. */
static void destroy_checks_blocks_freed_in_an_open_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, NULL, NULL, NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async_at(ctx, 2000, s, "alloc_site.c", 12, &p));
  smash(ctx, p, 2000, 5);
  MT_OK(metrale_stream_synchronize(ctx, s));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_free_async_at(ctx, p, s, "free_site.c", 22));
  assert_int_equal(stats(ctx).pads_pending, 0);  /* deferred to the capture's end */
  start_capture();
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:12"));
  assert_non_null(strstr(g_logged, "free_site.c:22"));
}

/* The same on the default stream, freed with metrale_free. */
static void destroy_checks_blocks_freed_in_a_default_stream_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, NULL, NULL, NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "alloc_site.c", 33, &p));
  expect_pattern(ctx, p, 1000, 64);
  smash(ctx, p, 1000, 3);
  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 44));
  start_capture();
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:33"));
  assert_non_null(strstr(g_logged, "free_site.c:44"));
}

/* A block the sweep frees names the sweep as the site that freed it. */
static void a_swept_block_names_the_sweep_as_its_free_site(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded(64, NULL, NULL, NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "alloc_site.c", 55, &p));
  smash(ctx, p, 1000, 7);
  size_t swept = 0;
  start_capture();
  MT_OK(metrale_sweep_unreleased(ctx, &swept));
  assert_int_equal(swept, 1);
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:55"));
  assert_non_null(strstr(g_logged, "<metrale_sweep_unreleased>"));
}

/* A padded block still in the quarantine at the destroy leaves it through
 * the check of freed pads: its overrun before the free is logged with both
 * sites. */
static void destroy_checks_blocks_still_quarantined(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  o.quarantine_bytes = 1 << 20;
  metrale_context_t* ctx = mt_open(&o);
  if (!mt_pool_on(ctx)) {
    mt_close(ctx);
    skip();
  }
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "alloc_site.c", 66, &p));
  smash(ctx, p, 1000, 9);
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 77));
  assert_true(stats(ctx).quarantined_bytes > 0);
  start_capture();
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:66"));
  assert_non_null(strstr(g_logged, "free_site.c:77"));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(destroy_checks_blocks_freed_in_an_open_capture),
      cmocka_unit_test(destroy_checks_blocks_freed_in_a_default_stream_capture),
      cmocka_unit_test(a_swept_block_names_the_sweep_as_its_free_site),
      cmocka_unit_test(destroy_checks_blocks_still_quarantined),
  };
  return MT_RUN(tests);
}
