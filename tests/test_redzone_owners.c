/* METRALE_REDZONE_REUSE=n: up to n owners of a padded pooled block share
 * one check of its pad. A free on the block's own stream caches it at once,
 * unchecked; only the same size takes it again, and the check that comes
 * (the n-th owner's free, another size, a scan, a trim, a stream's destroy,
 * the context's destroy) names every owner since the last one. The first
 * overrun found that way turns the reuse off for the context. Runs on both
 * backends; skipped with the pool off (METRALE_POOL=0). */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "freed_pads.h"
#include "test_support.h"

#define PAD 64

/* A padded context with METRALE_REDZONE_REUSE=reuse and, when not NULL,
 * METRALE_REDZONE_VERIFY_BATCH=batch. NULL: the pool is off (skip). */
static metrale_context_t* open_reuse(const char* reuse, const char* batch) {
  return open_padded(PAD, batch, NULL, reuse);
}

/* Four owners of one block, the first of which overran its pad: the first
 * three frees check nothing and the same block comes back with no fill; the
 * fourth free is the check (a batch of one: at once), which reports the
 * fourth owner and names the three before it with both their sites. Then
 * the reuse is off: the next free is checked at once. */
static void owners_share_one_check_and_are_all_named(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("4", "1");
  if (ctx == NULL) skip();
  metrale_devptr_t first = 0, p = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "owner.c", 1, &first));
  smash(ctx, first, 1000, 3);
  MT_OK(metrale_free_at(ctx, first, "free.c", 101));
  const metrale_pool_stats_t s0 = stats(ctx);
  assert_int_equal(s0.pads_checked, 0);
  assert_int_equal(s0.pads_pending, 0);
  for (int i = 2; i <= 3; ++i) {
    MT_OK(metrale_alloc_at(ctx, 1000, "owner.c", i, &p));
    assert_int_equal(p, first);
    MT_OK(metrale_free_at(ctx, p, "free.c", 100 + i));
  }
  const metrale_pool_stats_t s1 = stats(ctx);
  assert_int_equal(s1.pads_checked, 0);
  assert_int_equal(s1.pad_fills, s0.pad_fills);
  assert_int_equal(s1.pad_fills_skipped, s0.pad_fills_skipped + 2);
  MT_OK(metrale_alloc_at(ctx, 1000, "owner.c", 4, &p));
  assert_int_equal(p, first);
  start_capture();
  MT_OK(metrale_free_at(ctx, p, "free.c", 104));
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "allocated at owner.c:4, freed at free.c:104"));
  assert_non_null(strstr(g_logged, "one of the 3 earlier allocations"));
  assert_non_null(strstr(g_logged, "from owner.c:1 freed at free.c:101"));
  assert_non_null(strstr(g_logged, "from owner.c:3 freed at free.c:103"));
  assert_int_equal(stats(ctx).pads_checked, 1);
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("from owner.c:1 freed at free.c:101");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].line, 4);
  assert_int_equal(v[0].first_bad_offset, 3);
  /* Off now: a free is checked at once again. */
  MT_OK(metrale_alloc(ctx, 1000, &p));
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(stats(ctx).pads_checked, 2);
  mt_close(ctx);
}

/* Another size of the same 512-byte class never gets an unchecked block:
 * the pad it would write over is checked first, and reported with its one
 * owner exactly. */
static void another_size_checks_the_pad_first(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", "1");
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "first.c", 1, &a)); /* 1064 -> a 1536-byte block */
  smash(ctx, a, 1000, 0);
  MT_OK(metrale_free_at(ctx, a, "free.c", 2));
  assert_int_equal(stats(ctx).pads_checked, 0);
  start_capture();
  MT_OK(metrale_alloc(ctx, 1100, &b)); /* 1164 -> 1536 too */
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "allocated at first.c:1, freed at free.c:2"));
  assert_null(strstr(g_logged, "earlier"));
  assert_int_equal(stats(ctx).pads_checked, 1);
  expect_pattern(ctx, b, 1100, PAD);
  MT_OK(metrale_free(ctx, b));
  mt_close(ctx);
}

/* A scan checks the blocks cached unchecked: the overrun of an allocation
 * freed before it is reported, with both sites. */
static void scan_checks_blocks_cached_unchecked(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0;
  MT_OK(metrale_alloc_at(ctx, 300, "a.c", 5, &a));
  smash(ctx, a, 300, PAD - 1);
  MT_OK(metrale_free_at(ctx, a, "f.c", 6));
  assert_int_equal(stats(ctx).pads_pending, 0);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("a.c:5");
  MT_MESSAGE_HAS("freed at f.c:6");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, a);
  assert_int_equal(v[0].first_bad_offset, PAD - 1);
  assert_int_equal(stats(ctx).pads_checked, 1);
  MT_OK(metrale_redzone_scan(ctx, v, 2, &n));
  mt_close(ctx);
}

/* The live owner of a reused block whose pad the previous owner overran:
 * the scan reports the live allocation (its pad is what it reads) and says
 * that the earlier owner may have written it; the reuse is off after. */
static void live_report_names_the_earlier_owners(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc_at(ctx, 700, "a.c", 1, &a));
  smash(ctx, a, 700, 2);
  MT_OK(metrale_free_at(ctx, a, "f.c", 2));
  MT_OK(metrale_alloc_at(ctx, 700, "b.c", 3, &b));
  assert_int_equal(b, a);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, b);
  assert_string_equal(v[0].file, "b.c");
  MT_MESSAGE_HAS("one of the 1 earlier allocation");
  MT_MESSAGE_HAS("from a.c:1 freed at f.c:2");
  /* Reported: its free is checked (and quiet), and no block is reused
   * unchecked any more. */
  MT_OK(metrale_free(ctx, b));
  assert_int_equal(stats(ctx).pads_pending, 1);
  MT_OK(metrale_alloc(ctx, 300, &c));
  MT_OK(metrale_free(ctx, c));
  assert_int_equal(stats(ctx).pads_pending, 2);
  mt_close(ctx);
}

/* Only a free on the block's own stream of a block used there alone is
 * cached unchecked: a free on another stream, and a block marked with
 * record_stream, wait for their check as without the reuse. */
static void foreign_stream_and_marked_frees_wait_for_their_check(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc(ctx, 500, &a));
  MT_OK(metrale_free_async(ctx, a, s));
  assert_int_equal(stats(ctx).pads_pending, 1);
  MT_OK(metrale_alloc(ctx, 500, &b));
  MT_OK(metrale_record_stream(ctx, b, s));
  MT_OK(metrale_free(ctx, b));
  assert_int_equal(stats(ctx).pads_pending, 2);
  MT_OK(metrale_alloc(ctx, 500, &c));
  MT_OK(metrale_free(ctx, c));
  assert_int_equal(stats(ctx).pads_pending, 2);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* A stream's destroy hands its cached blocks on; its unchecked ones go to
 * their check first (on the heir, after the stream's work), so nothing
 * names the dead stream and the overrun is still found. */
static void stream_destroy_checks_its_unchecked_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0;
  MT_OK(metrale_alloc_async_at(ctx, 400, s, "a.c", 9, &a));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, a, 400, 1);
  MT_OK(metrale_free_async_at(ctx, a, s, "f.c", 10));
  assert_int_equal(stats(ctx).pads_pending, 0);
  MT_OK(metrale_stream_destroy(ctx, s));
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("a.c:9");
  MT_MESSAGE_HAS("freed at f.c:10");
  assert_int_equal(n, 1);
  /* The block is usable after: same size, default stream. */
  MT_OK(metrale_alloc(ctx, 400, &a));
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  mt_close(ctx);
}

/* An allocation while its stream captures takes no cached block whose
 * last use is not known complete: the stream's unchecked blocks go to their
 * check (which waits for the capture's end) and the allocation gets other
 * memory, its pad filled. After the capture the overrun of the block's
 * owner is still reported, with both sites. */
static void capture_sends_unchecked_blocks_to_their_check(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_async_at(ctx, 600, s, "a.c", 21, &a));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, a, 600, 4);
  MT_OK(metrale_free_async_at(ctx, a, s, "f.c", 22));
  assert_int_equal(stats(ctx).pads_pending, 0);
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_alloc_async(ctx, 600, s, &b));
  assert_true(b != a);
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  MT_OK(metrale_free_async(ctx, b, s));
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("a.c:21");
  MT_MESSAGE_HAS("freed at f.c:22");
  assert_int_equal(n, 1);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* The last owner's free takes the long way (a capture open on another
 * stream; the sweep): its check still names the earlier owners, and the
 * finding turns the reuse off. */
static void long_way_frees_name_the_earlier_owners(void** state) {
  (void)state;
  for (int sweep = 0; sweep <= 1; ++sweep) {
    metrale_context_t* ctx = open_reuse("8", "1");
    if (ctx == NULL) skip();
    metrale_stream_t* other = NULL;
    MT_OK(metrale_stream_create(ctx, &other));
    metrale_devptr_t first = 0, p = 0;
    MT_OK(metrale_alloc_at(ctx, 700, "own.c", 1, &first));
    smash(ctx, first, 700, 2);
    MT_OK(metrale_free_at(ctx, first, "fr.c", 11));
    MT_OK(metrale_alloc_at(ctx, 700, "own.c", 2, &p));
    assert_int_equal(p, first);
    MT_OK(metrale_free_at(ctx, p, "fr.c", 12));
    MT_OK(metrale_alloc_at(ctx, 700, "own.c", 3, &p));
    assert_int_equal(p, first);
    start_capture();
    if (sweep) {
      size_t swept = 0;
      MT_OK(metrale_sweep_unreleased(ctx, &swept));
      assert_int_equal(swept, 1);
    } else {
      MT_OK(metrale_graph_begin_capture(ctx, other));
      MT_OK(metrale_free_at(ctx, p, "fr.c", 13));
      MT_OK(metrale_graph_abort_capture(ctx, other));
    }
    metrale_redzone_violation_t v[2];
    size_t n = 0;
    MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
    stop_capture();
    assert_int_equal(n, 1);
    assert_int_equal(v[0].line, 3);
    assert_int_equal(g_lines, 1);
    assert_non_null(strstr(g_logged, sweep ? "freed at <metrale_sweep_unreleased>"
                                           : "freed at fr.c:13"));
    assert_non_null(strstr(g_logged, "one of the 2 earlier allocations"));
    assert_non_null(strstr(g_logged, "from own.c:1 freed at fr.c:11"));
    MT_MESSAGE_HAS("from own.c:2 freed at fr.c:12");
    /* Off now: a free of the same size is checked at once. */
    const uint64_t checked = stats(ctx).pads_checked;
    MT_OK(metrale_alloc(ctx, 700, &p));
    MT_OK(metrale_free(ctx, p));
    assert_int_equal(stats(ctx).pads_checked, checked + 1);
    MT_OK(metrale_stream_destroy(ctx, other));
    mt_close(ctx);
  }
}

/* The out-of-memory retry checks the unchecked blocks before it gives the
 * cache back, another stream's too: the overrun of one freed before the
 * failed call is reported. */
static void oom_retry_checks_unchecked_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0, big = 0;
  MT_OK(metrale_alloc_async_at(ctx, 512, s, "alloc_site.c", 31, &p));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, p, 512, 1);
  MT_OK(metrale_free_async_at(ctx, p, s, "free_site.c", 32));
  assert_int_equal(stats(ctx).pads_checked, 0);
  MT_STATUS(metrale_alloc(ctx, (size_t)1 << 40, &big), METRALE_ERROR_OUT_OF_MEMORY);
  assert_int_equal(stats(ctx).pads_checked, 1);
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("freed at free_site.c:32");
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* Trim checks the unchecked blocks (then releases what it can), and the
 * context's destroy logs an overrun still unchecked. */
static void trim_and_destroy_check_unchecked_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("8", NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 512, &p));
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(stats(ctx).pads_checked, 0);
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  assert_int_equal(stats(ctx).pads_checked, 1);
  assert_int_equal(stats(ctx).pads_pending, 0);
  MT_OK(metrale_alloc_at(ctx, 512, "alloc_site.c", 66, &p));
  smash(ctx, p, 512, 2);
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 77));
  assert_int_equal(stats(ctx).pads_pending, 0);
  start_capture();
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:66"));
  assert_non_null(strstr(g_logged, "free_site.c:77"));
}

/* Threads on streams of their own, allocating and freeing sizes that share
 * classes, some frees on another thread's stream: no false report, no
 * block lost (everything back at the end), with the reuse on. */
#define THREADS 8
#define ROUNDS 400
struct worker {
  metrale_context_t* ctx;
  metrale_stream_t* own;
  metrale_stream_t* other;
  int id;
  int rounds;
  int failed;
};
static void* work(void* arg) {
  struct worker* w = arg;
  metrale_devptr_t held[4] = {0, 0, 0, 0};
  for (int r = 0; r < w->rounds && !w->failed; ++r) {
    const size_t bytes = 256 + (size_t)((r * 7 + w->id) % 5) * 100;
    metrale_devptr_t* slot = &held[r % 4];
    if (*slot != 0) {
      metrale_stream_t* on = (r % 13 == 0) ? w->other : w->own;
      if (metrale_free_async(w->ctx, *slot, on) != METRALE_OK) w->failed = 1;
      *slot = 0;
    }
    if (metrale_alloc_async(w->ctx, bytes, w->own, slot) != METRALE_OK) w->failed = 1;
  }
  for (int i = 0; i < 4; ++i)
    if (held[i] != 0 && metrale_free_async(w->ctx, held[i], w->own) != METRALE_OK) w->failed = 1;
  return NULL;
}
static void threads_reuse_without_false_reports(void** state) {
  (void)state;
  metrale_context_t* ctx = open_reuse("4", NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* streams[THREADS];
  for (int i = 0; i < THREADS; ++i) MT_OK(metrale_stream_create(ctx, &streams[i]));
  pthread_t t[THREADS];
  struct worker w[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    /* Under valgrind (memory errors are its job; TSan races) fewer. */
    w[i] = (struct worker){ctx, streams[i], streams[(i + 1) % THREADS], i,
                           mt_under_valgrind() ? ROUNDS / 8 : ROUNDS, 0};
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(t[i], NULL);
    assert_int_equal(w[i].failed, 0);
  }
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  assert_int_equal(stats(ctx).pads_overwritten, 0);
  assert_int_equal(stats(ctx).in_use_bytes, 0);
  for (int i = 0; i < THREADS; ++i) MT_OK(metrale_stream_destroy(ctx, streams[i]));
  mt_close(ctx);
}

/* A value outside 0..16 or not a number fails the create, naming it. */
static void malformed_reuse_knob_fails_the_create(void** state) {
  (void)state;
  const char* bad[] = {"17", "four", "-1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    setenv("METRALE_REDZONE_REUSE", bad[i], 1);
    metrale_context_options_t o = mt_options();
    o.redzone_bytes = PAD;
    metrale_context_t* ctx = NULL;
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("METRALE_REDZONE_REUSE");
    unsetenv("METRALE_REDZONE_REUSE");
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(owners_share_one_check_and_are_all_named),
      cmocka_unit_test(another_size_checks_the_pad_first),
      cmocka_unit_test(scan_checks_blocks_cached_unchecked),
      cmocka_unit_test(live_report_names_the_earlier_owners),
      cmocka_unit_test(foreign_stream_and_marked_frees_wait_for_their_check),
      cmocka_unit_test(stream_destroy_checks_its_unchecked_blocks),
      cmocka_unit_test(capture_sends_unchecked_blocks_to_their_check),
      cmocka_unit_test(long_way_frees_name_the_earlier_owners),
      cmocka_unit_test(oom_retry_checks_unchecked_blocks),
      cmocka_unit_test(trim_and_destroy_check_unchecked_blocks),
      cmocka_unit_test(threads_reuse_without_false_reports),
      cmocka_unit_test(malformed_reuse_knob_fails_the_create),
  };
  return MT_RUN(tests);
}
