/* Red zones on pooled blocks without a fill per allocation: freed padded
 * blocks wait for a batch check of their pads (METRALE_REDZONE_VERIFY_BATCH
 * / _BYTES), overruns of freed allocations are reported with the site that
 * allocated and the site that freed, and an intact block is reused without
 * a new fill (pool stats pad_fills / pad_fills_skipped). Runs on both
 * backends; skipped with the pool off (METRALE_POOL=0), where a free is a
 * driver free and nothing waits. */
#include <stdlib.h>
#include <string.h>

#include "freed_pads.h"
#include "test_support.h"

#define PAD 64

/* A padded context; batch: METRALE_REDZONE_VERIFY_BATCH while it is created
 * (NULL: the default). NULL return: the pool is off, the test skips. */
static metrale_context_t* open_rz_ordered(const char* batch, const char* ordered) {
  return open_padded(PAD, batch, ordered, NULL);
}

/* METRALE_REDZONE_VERIFY_ORDERED as set (the default: on). */
static metrale_context_t* open_rz(const char* batch) { return open_rz_ordered(batch, NULL); }

static void expect_pad_is_pattern(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes) {
  expect_pattern(ctx, p, bytes, PAD);
}

/* An overrun written into a pad, and the allocation freed before any scan:
 * the check at the free (batch of 1) logs it with both sites, and the next
 * scan reports it once, naming both sites. */
static void freed_overrun_is_reported_with_both_sites(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1");
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "alloc_site.c", 11, &p));
  smash(ctx, p, 1000, 3);
  start_capture();
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 22));
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:11"));
  assert_non_null(strstr(g_logged, "free_site.c:22"));
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("alloc_site.c:11");
  MT_MESSAGE_HAS("freed at free_site.c:22");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].bytes, 1000);
  assert_string_equal(v[0].file, "alloc_site.c");
  assert_int_equal(v[0].line, 11);
  assert_int_equal(v[0].first_bad_offset, 3);
  assert_int_equal(v[0].bad_bytes, 1);
  assert_int_equal(v[0].found, 0x5a);
  /* Reported once. */
  MT_OK(metrale_redzone_scan(ctx, v, 4, &n));
  assert_int_equal(n, 0);
  mt_close(ctx);
}

/* A free made while the block's stream captures waits for the capture's
 * end; its site (copied at the call: the caller's buffer changes after)
 * still names the free in the report. It once said "<unknown>:0". */
static void a_free_deferred_by_a_capture_keeps_its_site(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async_at(ctx, 600, s, "alloc_site.c", 66, &p));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, p, 600, 2);
  char site[32] = "capture_free.c";
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_free_at(ctx, p, site, 77));
  strcpy(site, "overwritten.c");
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("alloc_site.c:66");
  MT_MESSAGE_HAS("freed at capture_free.c:77");
  assert_int_equal(n, 1);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* metrale_free_async names its site like metrale_free (copied at the
 * call); it once had none, and reports said "freed at <unknown>:0". */
static void an_async_free_names_its_site(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async_at(ctx, 500, s, "alloc_site.c", 12, &p));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, p, 500, 1);
  char site[32] = "async_free.c";
  MT_OK(metrale_free_async_at(ctx, p, s, site, 34));
  strcpy(site, "overwritten.c");
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("alloc_site.c:12");
  MT_MESSAGE_HAS("freed at async_free.c:34");
  assert_int_equal(n, 1);
  /* Through the macro: this file's line. */
  MT_OK(metrale_alloc_async(ctx, 500, s, &p));
  MT_OK(metrale_stream_synchronize(ctx, s));
  smash(ctx, p, 500, 1);
  MT_OK(metrale_free_async(ctx, p, s));
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("freed at ");
  MT_MESSAGE_HAS("test_redzone_reuse.c:");
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* With the default batch nothing is checked at the free; the scan checks
 * the waiting block and reports it, with its tag. */
static void scan_checks_waiting_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_tag_push("encoder.rz"));
  MT_OK(metrale_alloc_at(ctx, 300, "alloc_site.c", 33, &p));
  MT_OK(metrale_tag_pop());
  smash(ctx, p, 300, PAD - 1);
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 44));
  assert_int_equal(stats(ctx).pads_pending, 1);
  assert_int_equal(stats(ctx).pad_checks, 0);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("free_site.c:44");
  MT_MESSAGE_HAS("tag encoder.rz");
  assert_int_equal(n, 1);
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pads_checked, 1);
  mt_close(ctx);
}

/* Live padded allocations and waiting freed blocks in one scan (the freed
 * blocks' check rides in the scan's own device pass): a live overrun, a
 * freed overrun and a clean freed block. Both overruns are reported once,
 * each with its own sites; the list is drained; the next scan reports only
 * the live one, which is still there. */
static void scan_checks_live_and_freed_pads_together(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  metrale_devptr_t live = 0, clean_live = 0, freed_bad = 0, freed_ok = 0;
  MT_OK(metrale_alloc_at(ctx, 700, "live_site.c", 1, &live));
  MT_OK(metrale_alloc_at(ctx, 900, "clean_live_site.c", 2, &clean_live));
  MT_OK(metrale_alloc_at(ctx, 500, "freed_site.c", 3, &freed_bad));
  MT_OK(metrale_alloc_at(ctx, 400, "ok_site.c", 4, &freed_ok));
  smash(ctx, live, 700, 5);
  smash(ctx, freed_bad, 500, 0);
  MT_OK(metrale_free_at(ctx, freed_bad, "free_bad.c", 30));
  MT_OK(metrale_free_at(ctx, freed_ok, "free_ok.c", 40));
  assert_int_equal(stats(ctx).pads_pending, 2);
  const uint64_t checked = stats(ctx).pads_checked;
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 2);
  int saw_live = 0, saw_freed = 0;
  for (size_t i = 0; i < n; ++i) {
    if (v[i].ptr == live && strcmp(v[i].file, "live_site.c") == 0) saw_live++;
    if (v[i].ptr == freed_bad && strcmp(v[i].file, "freed_site.c") == 0) saw_freed++;
    assert_int_equal(v[i].bad_bytes, 1);
  }
  assert_int_equal(saw_live, 1);
  assert_int_equal(saw_freed, 1);
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pads_checked, checked + 2);
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  /* Reported once: the next scan sees only the live overrun. */
  MT_STATUS(metrale_redzone_scan(ctx, v, 4, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_true(v[0].ptr == live);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  MT_OK(metrale_redzone_scan(ctx, v, 4, &n));
  assert_int_equal(n, 0);
  MT_OK(metrale_free(ctx, live));
  MT_OK(metrale_free(ctx, clean_live));
  mt_close(ctx);
}

/* An intact block comes back from its check with its pattern recorded: the
 * same size again gets the same block, no fill, and a pad that is the
 * pattern (and a real overrun of the new owner is still found). */
static void intact_reuse_gets_no_fill(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1");
  if (ctx == NULL) skip();
  mt_load_kernels(ctx);
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(mt_fill_u32(ctx, NULL, a, 0x11111111u, 4096 / 4)); /* the owner's bytes only */
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_free(ctx, a));
  const metrale_pool_stats_t before = stats(ctx);
  assert_int_equal(before.pads_pending, 0);
  MT_OK(metrale_alloc(ctx, 4096, &b));
  assert_int_equal(a, b);
  const metrale_pool_stats_t after = stats(ctx);
  assert_int_equal(after.pad_fills, before.pad_fills);
  assert_int_equal(after.pad_fills_skipped, before.pad_fills_skipped + 1);
  expect_pad_is_pattern(ctx, b, 4096);
  MT_OK(mt_overflow_write(ctx, b, 4096, 2, 0x01010101u));
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, b);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  MT_OK(metrale_free(ctx, b));
  mt_close(ctx);
}

/* n blocks of 256 B into p, then (free_all) back: the batch tests' rounds. */
static void alloc_all(metrale_context_t* ctx, metrale_devptr_t* p, int n) {
  for (int i = 0; i < n; ++i) MT_OK(metrale_alloc(ctx, 256, &p[i]));
}

static void free_all(metrale_context_t* ctx, const metrale_devptr_t* p, int n) {
  for (int i = 0; i < n; ++i) MT_OK(metrale_free(ctx, p[i]));
}

/* A batch larger than the default: the whole batch comes back from its check
 * at once, all of one size, and every block keeps its pattern record (the
 * bins keep twice the batch), so the next round of the same size pays no
 * fill. With the bins' usual cap the blocks past it coalesced in the free
 * index, lost their record, and each was filled again. */
static void a_large_batch_comes_back_without_fills(void** state) {
  (void)state;
  enum { kBatch = 2048 };
  metrale_context_t* ctx = open_rz("2048");
  if (ctx == NULL) skip();
  static metrale_devptr_t p[kBatch];
  for (int round = 0; round < 2; ++round) {
    const metrale_pool_stats_t before = stats(ctx);
    alloc_all(ctx, p, kBatch);
    const metrale_pool_stats_t mid = stats(ctx);
    if (round == 1) {
      /* Every block of the second round is one the check gave back. */
      assert_int_equal(mid.pad_fills, before.pad_fills);
      assert_int_equal(mid.pad_fills_skipped, before.pad_fills_skipped + kBatch);
    }
    free_all(ctx, p, kBatch);
    /* The last free met the batch bound: the check ran, nothing waits. */
    assert_int_equal(stats(ctx).pads_pending, 0);
  }
  mt_close(ctx);
}

/* The documented default batch: 255 freed padded blocks wait, and the
 * 256th free starts their check. */
static void the_default_batch_is_256_frees(void** state) {
  (void)state;
  enum { kBatch = 256 };
  /* The defaults, whatever the runner's environment says. */
  unsetenv("METRALE_REDZONE_VERIFY_BATCH");
  unsetenv("METRALE_REDZONE_VERIFY_BYTES");
  unsetenv("METRALE_REDZONE_REUSE");
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  static metrale_devptr_t p[kBatch];
  alloc_all(ctx, p, kBatch);
  const uint64_t checks = stats(ctx).pad_checks;
  free_all(ctx, p, kBatch - 1);
  assert_int_equal(stats(ctx).pads_pending, kBatch - 1);
  assert_int_equal(stats(ctx).pad_checks, checks);
  MT_OK(metrale_free(ctx, p[kBatch - 1]));
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pad_checks, checks + 1);
  mt_close(ctx);
}

/* The same block (same 512-byte class) asked for with a size that puts the
 * pad below the checked range is filled again; a size whose pad still lies
 * inside the range is not. Either way the pad is the pattern. */
static void size_change_refills_only_outside_the_range(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1");
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a)); /* 4160 -> a 4608-byte block */
  MT_OK(metrale_free(ctx, a));
  metrale_pool_stats_t s0 = stats(ctx);
  MT_OK(metrale_alloc(ctx, 4040, &b)); /* smaller: pad [4040, 4104) */
  assert_int_equal(b, a);
  metrale_pool_stats_t s1 = stats(ctx);
  assert_int_equal(s1.pad_fills, s0.pad_fills + 1);
  expect_pad_is_pattern(ctx, b, 4040);
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_alloc(ctx, 4400, &c)); /* larger: pad [4400, 4464), inside */
  assert_int_equal(c, a);
  metrale_pool_stats_t s2 = stats(ctx);
  assert_int_equal(s2.pad_fills, s1.pad_fills);
  assert_int_equal(s2.pad_fills_skipped, s1.pad_fills_skipped + 1);
  expect_pad_is_pattern(ctx, c, 4400);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_free(ctx, c));
  mt_close(ctx);
}

/* A write into the slack after the pad (the block's rounding, filled with
 * the pattern too) is no pad overrun: not reported, but the block keeps only
 * its pad as checked, so a larger size whose pad lies in the slack is
 * filled again. */
static void dirty_slack_costs_only_the_record(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1");
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a)); /* a 4608-byte block: pad and slack filled */
  smash(ctx, a, 4096, PAD + 10);        /* in the slack, past the pad */
  MT_OK(metrale_free(ctx, a));
  assert_int_equal(stats(ctx).pads_overwritten, 0);
  metrale_pool_stats_t s0 = stats(ctx);
  MT_OK(metrale_alloc(ctx, 4400, &b)); /* pad [4400, 4464): in the dirty slack */
  assert_int_equal(b, a);
  assert_int_equal(stats(ctx).pad_fills, s0.pad_fills + 1);
  expect_pad_is_pattern(ctx, b, 4400);
  MT_OK(metrale_free(ctx, b));
  metrale_pool_stats_t s1 = stats(ctx);
  MT_OK(metrale_alloc(ctx, 4400, &c)); /* refilled and checked: no fill now */
  assert_int_equal(c, a);
  assert_int_equal(stats(ctx).pad_fills, s1.pad_fills);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_free(ctx, c));
  mt_close(ctx);
}

/* A padded block is never handed out before its check: while it waits,
 * the same size gets another block; after the check, it comes back. A
 * dirty one comes back with its pad written over: by the stream-ordered
 * check, which restores the pattern (no fill), or, with that check off,
 * without a record (filled again). */
static void dirty_block_comes_back(int ordered) {
  metrale_context_t* ctx = open_rz_ordered("1000", ordered ? "1" : "0");
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0, c = 0;
  MT_OK(metrale_alloc(ctx, 256, &a));
  smash(ctx, a, 256, 0);
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_alloc(ctx, 256, &b));
  assert_int_not_equal(a, b);
  assert_int_equal(stats(ctx).blocks_in_use, 2);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  const metrale_pool_stats_t before = stats(ctx);
  MT_OK(metrale_alloc(ctx, 256, &c));
  assert_int_equal(c, a);
  assert_int_equal(stats(ctx).pad_fills, before.pad_fills + (ordered ? 0 : 1));
  expect_pad_is_pattern(ctx, c, 256);
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_free(ctx, c));
  mt_close(ctx);
}
static void waiting_block_is_not_handed_out(void** state) {
  (void)state;
  dirty_block_comes_back(1);
}
static void waiting_block_is_not_handed_out_synchronous(void** state) {
  (void)state;
  dirty_block_comes_back(0);
}

/* Trim, the out-of-memory retry and destroy check what waits, too. */
static void trim_oom_and_destroy_drain_the_list(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1000");
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 512, &p));
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(stats(ctx).pads_pending, 1);
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pads_checked, 1);
  /* A request no device meets: the retry checks the waiting block first. */
  MT_OK(metrale_alloc(ctx, 512, &p));
  smash(ctx, p, 512, 1);
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 55));
  assert_int_equal(stats(ctx).pads_pending, 1);
  metrale_devptr_t big = 0;
  MT_STATUS(metrale_alloc(ctx, (size_t)1 << 40, &big), METRALE_ERROR_OUT_OF_MEMORY);
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  /* Destroy checks the rest and logs an overwritten one. */
  MT_OK(metrale_alloc_at(ctx, 512, "alloc_site.c", 66, &p));
  smash(ctx, p, 512, 2);
  MT_OK(metrale_free_at(ctx, p, "free_site.c", 77));
  start_capture();
  mt_close(ctx);
  stop_capture();
  assert_int_equal(g_lines, 1);
  assert_non_null(strstr(g_logged, "alloc_site.c:66"));
  assert_non_null(strstr(g_logged, "free_site.c:77"));
}

/* pads_overwritten counts every check that found a pad overwritten, also
 * one whose overrun a scan reported while the allocation was live (the
 * check reports it not again). ordered: METRALE_REDZONE_VERIFY_ORDERED. */
static void a_reported_pad_counts_at_its_check(const char* ordered) {
  metrale_context_t* ctx = open_rz_ordered("1000", ordered);
  if (ctx == NULL) skip();
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 1000, &p));
  smash(ctx, p, 1000, 0);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  start_capture();
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_pool_trim(ctx, 0, NULL)); /* runs the check of the freed pad */
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n)); /* reads a queued check's results */
  stop_capture();
  assert_int_equal(n, 0);
  assert_int_equal(g_lines, 0); /* not reported again */
  assert_int_equal(stats(ctx).pads_checked, 1);
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  mt_close(ctx);
}
static void a_reported_pad_counts_at_its_ordered_check(void** state) {
  (void)state;
  a_reported_pad_counts_at_its_check(NULL);
}
static void a_reported_pad_counts_at_its_synchronous_check(void** state) {
  (void)state;
  a_reported_pad_counts_at_its_check("0");
}

/* The reports kept for the next scan are bounded: past
 * METRALE_REDZONE_FREED_REPORTS_MAX an overrun of a freed block is logged
 * and counted (pads_overwritten, pads_unlisted), never listed. */
static int g_freed_lines;
static void count_freed_lines(metrale_log_level_t level, const char* msg, void* user) {
  (void)user;
  if (level >= METRALE_LOG_ERROR && strstr(msg, "before its free") != NULL) g_freed_lines++;
}
static void reports_past_the_bound_are_counted_unlisted(void** state) {
  (void)state;
  enum { N = METRALE_REDZONE_FREED_REPORTS_MAX + 3 };
  metrale_context_t* ctx = open_rz(NULL);
  if (ctx == NULL) skip();
  static metrale_devptr_t p[N];
  for (int i = 0; i < N; ++i) {
    MT_OK(metrale_alloc(ctx, 1000, &p[i]));
    smash(ctx, p[i], 1000, 1);
  }
  g_freed_lines = 0; /* many: not captured as text */
  MT_OK(metrale_log_set_callback(count_freed_lines, NULL));
  for (int i = 0; i < N; ++i) MT_OK(metrale_free(ctx, p[i]));
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_int_equal(g_freed_lines, N); /* every one logged */
  assert_int_equal(n, METRALE_REDZONE_FREED_REPORTS_MAX);
  assert_int_equal(stats(ctx).pads_overwritten, N);
  assert_int_equal(stats(ctx).pads_unlisted, 3);
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  mt_close(ctx);
}

/* Stream order: a kernel on stream s overruns the pad, and the block is
 * freed on s right after, with nothing waited for. The check waits for s
 * before it reads the pad, so the overrun is found. */
static void check_waits_for_the_freeing_stream(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("1");
  if (ctx == NULL) skip();
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  uint64_t bytes = 1 << 20, extra = 5;
  uint32_t value = 0x02020202u;
  MT_OK(metrale_alloc_async(ctx, bytes, s, &p));
  void* params[] = {&p, &bytes, &extra, &value};
  const metrale_dim3_t grid = {(uint32_t)((bytes + extra + 255) / 256), 1, 1};
  const metrale_dim3_t block = {256, 1, 1};
  MT_OK(metrale_launch(ctx, mt_kernel(ctx, "overflow_write"), grid, block, 0, s, params));
  MT_OK(metrale_free_async(ctx, p, s));
  assert_int_equal(stats(ctx).pads_overwritten, 1);
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* Queues on s the test kernel that writes `byte` over p's `bytes` and
 * `extra` bytes past them (into the pad). */
static void launch_overrun(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t p,
                           uint64_t bytes, uint64_t extra, uint8_t byte) {
  uint32_t value = byte * 0x01010101u;
  void* params[] = {&p, &bytes, &extra, &value};
  const metrale_dim3_t grid = {(uint32_t)((bytes + extra + 255) / 256), 1, 1};
  const metrale_dim3_t block = {256, 1, 1};
  MT_OK(metrale_launch(ctx, mt_kernel(ctx, "overflow_write"), grid, block, 0, s, params));
}

/* The stream-ordered check (batches above one): a kernel on s overruns a
 * pad and the block is freed on s with nothing waited for; the batch's
 * check is queued on s behind the kernel, so it sees the overrun, and the
 * scan reports it with the allocation's site. The block is reused on s at once, its
 * pad restored, with no fill. */
static void ordered_check_follows_the_freeing_stream(void** state) {
  (void)state;
  metrale_context_t* ctx = open_rz("2");
  if (ctx == NULL) skip();
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0, q = 0, r = 0;
  uint64_t bytes = 1 << 20, extra = 5;
  MT_OK(metrale_alloc_async_at(ctx, bytes, s, "kernel_site.c", 7, &p));
  MT_OK(metrale_alloc_async(ctx, 4096, s, &q));
  launch_overrun(ctx, s, p, bytes, extra, 0x02);
  MT_OK(metrale_free_async(ctx, p, s));
  MT_OK(metrale_free_async(ctx, q, s)); /* the second: the batch's check */
  assert_int_equal(stats(ctx).pads_pending, 0);
  const metrale_pool_stats_t before = stats(ctx);
  MT_OK(metrale_alloc_async(ctx, bytes, s, &r)); /* on s: at once, no fill */
  assert_int_equal(r, p);
  assert_int_equal(stats(ctx).pad_fills, before.pad_fills);
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("kernel_site.c:7");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].bad_bytes, 5);
  assert_int_equal(v[0].first_bad_offset, 0);
  assert_int_equal(v[0].found, 0x02);
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_pad_is_pattern(ctx, r, bytes);
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_free_async(ctx, r, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* Queues on s a write of `extra` bytes past the `bytes` of p, behind a
 * kernel that holds s for 100 ms on a GPU: a check of p's pad queued
 * anywhere but behind it on s runs long before the overrun lands. */
static void late_overrun(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t p,
                         uint64_t bytes, uint64_t extra) {
  uint64_t ns = 100u * 1000u * 1000u;
  void* spin_params[] = {&ns};
  const metrale_dim3_t one = {1, 1, 1};
  MT_OK(metrale_launch(ctx, mt_kernel(ctx, "spin_ns"), one, one, 0, s, spin_params));
  launch_overrun(ctx, s, p, bytes, extra, 0x03);
}

/* A first check of freed blocks on s and its collection: the backend's
 * first check loads its kernel and allocates its result slot, either of
 * which may wait for the whole device. Done here, the checks under test
 * wait for nothing but their streams. */
static void warm_up_checks(metrale_context_t* ctx, metrale_stream_t* s, uint64_t bytes) {
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_alloc_async(ctx, bytes, s, &p));
  MT_OK(metrale_alloc_async(ctx, bytes, s, &q));
  const uint64_t checks = stats(ctx).pad_checks;
  MT_OK(metrale_free_async(ctx, p, s));
  MT_OK(metrale_free_async(ctx, q, s));
  assert_int_equal(stats(ctx).pad_checks, checks + 1); /* the batch of two started it */
  size_t n = 1;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
}

/* One batch of freed blocks used on several streams: every block's check
 * runs after all the work that used it. (a) Blocks freed on two streams:
 * each stream gets its own pass, behind its own work. (b) A block marked
 * with record_stream on another stream: its check waits for that stream
 * too. The overruns land late on their stream (late_overrun), so a check
 * queued on the first block's stream, or on the freeing stream alone, would
 * run first and miss them. On the host backend stream work runs at once and
 * this holds trivially; on a GPU it is the ordering under test
 * (scripts/mutations-gpu.txt breaks it on purpose). */
static void checks_follow_every_stream_of_a_batch(void** state) {
  (void)state;
  for (int marked = 0; marked < 2; ++marked) {
    metrale_context_t* ctx = open_rz("2");
    if (ctx == NULL) skip();
    mt_load_kernels(ctx);
    metrale_stream_t *s1 = NULL, *s2 = NULL;
    MT_OK(metrale_stream_create(ctx, &s1));
    MT_OK(metrale_stream_create(ctx, &s2));
    const uint64_t bytes = 4096, extra = 3;
    warm_up_checks(ctx, s1, bytes);
    metrale_devptr_t a = 0, b = 0;
    MT_OK(metrale_alloc_async(ctx, bytes, s1, &a));
    MT_OK(metrale_alloc_async_at(ctx, bytes, marked ? s1 : s2, "late_site.c", 9, &b));
    MT_OK(metrale_stream_synchronize(ctx, s1));
    late_overrun(ctx, s2, b, bytes, extra);
    if (marked) MT_OK(metrale_record_stream(ctx, b, s2));
    MT_OK(metrale_free_async(ctx, a, s1));
    MT_OK(metrale_free_async(ctx, b, marked ? s1 : s2)); /* the batch's check */
    metrale_redzone_violation_t v[2];
    size_t n = 0;
    MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
    MT_MESSAGE_HAS("late_site.c:9");
    assert_int_equal(n, 1);
    assert_int_equal(v[0].ptr, b);
    assert_int_equal(v[0].bad_bytes, extra);
    assert_int_equal(v[0].found, 0x03);
    MT_OK(metrale_stream_synchronize(ctx, s2));
    MT_OK(metrale_stream_destroy(ctx, s1));
    MT_OK(metrale_stream_destroy(ctx, s2));
    mt_close(ctx);
  }
}

/* METRALE_REDZONE_VERIFY_BYTES: the blocks waiting for their check start
 * one when their bytes reach the bound, long before the count does. */
static void byte_bound_starts_a_check(void** state) {
  (void)state;
  setenv("METRALE_REDZONE_VERIFY_BYTES", "8192", 1);
  metrale_context_t* ctx = open_rz(NULL); /* the count bound stays 256 */
  unsetenv("METRALE_REDZONE_VERIFY_BYTES");
  if (ctx == NULL) skip();
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a)); /* 4096 + 64 B: a 4608-byte block */
  MT_OK(metrale_alloc(ctx, 4096, &b));
  const uint64_t checks = stats(ctx).pad_checks;
  MT_OK(metrale_free(ctx, a));
  assert_int_equal(stats(ctx).pads_pending, 1); /* 4608 B wait: under the bound */
  assert_int_equal(stats(ctx).pad_checks, checks);
  MT_OK(metrale_free(ctx, b)); /* 9216 B: the bound is met */
  assert_int_equal(stats(ctx).pads_pending, 0);
  assert_int_equal(stats(ctx).pad_checks, checks + 1);
  mt_close(ctx);
}

/* A huge batch (2^31: twice it no longer fits the bins' 32-bit cap): the
 * cap for checked blocks stays bounded and nonzero, blocks wait until the
 * byte bound or a scan, and the scan checks and gives back every one with
 * its record. */
static void a_huge_batch_keeps_the_bins(void** state) {
  (void)state;
  enum { kBlocks = 600 };
  metrale_context_t* ctx = open_rz("2147483648");
  if (ctx == NULL) skip();
  static metrale_devptr_t p[kBlocks];
  alloc_all(ctx, p, kBlocks);
  free_all(ctx, p, kBlocks);
  assert_int_equal(stats(ctx).pads_pending, kBlocks);
  metrale_redzone_violation_t v[1];
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, v, 1, &n));
  assert_int_equal(n, 0);
  assert_int_equal(stats(ctx).pads_pending, 0);
  /* Every block came back with its record: the same size again, no fill. */
  const metrale_pool_stats_t before = stats(ctx);
  alloc_all(ctx, p, kBlocks);
  assert_int_equal(stats(ctx).pad_fills, before.pad_fills);
  free_all(ctx, p, kBlocks);
  mt_close(ctx);
}

static void malformed_knob_fails_the_create(void** state) {
  (void)state;
  setenv("METRALE_REDZONE_VERIFY_BYTES", "12x", 1);
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  metrale_context_t* ctx = NULL;
  MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("METRALE_REDZONE_VERIFY_BYTES");
  unsetenv("METRALE_REDZONE_VERIFY_BYTES");
  /* METRALE_REDZONE_VERIFY_ORDERED takes 0 or 1 only. */
  for (int i = 0; i < 2; ++i) {
    setenv("METRALE_REDZONE_VERIFY_ORDERED", i == 0 ? "2" : "yes", 1);
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("METRALE_REDZONE_VERIFY_ORDERED");
  }
  unsetenv("METRALE_REDZONE_VERIFY_ORDERED");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(freed_overrun_is_reported_with_both_sites),
      cmocka_unit_test(scan_checks_waiting_blocks),
      cmocka_unit_test(scan_checks_live_and_freed_pads_together),
      cmocka_unit_test(a_free_deferred_by_a_capture_keeps_its_site),
      cmocka_unit_test(an_async_free_names_its_site),
      cmocka_unit_test(intact_reuse_gets_no_fill),
      cmocka_unit_test(a_large_batch_comes_back_without_fills),
      cmocka_unit_test(the_default_batch_is_256_frees),
      cmocka_unit_test(size_change_refills_only_outside_the_range),
      cmocka_unit_test(dirty_slack_costs_only_the_record),
      cmocka_unit_test(waiting_block_is_not_handed_out),
      cmocka_unit_test(waiting_block_is_not_handed_out_synchronous),
      cmocka_unit_test(trim_oom_and_destroy_drain_the_list),
      cmocka_unit_test(a_reported_pad_counts_at_its_ordered_check),
      cmocka_unit_test(a_reported_pad_counts_at_its_synchronous_check),
      cmocka_unit_test(reports_past_the_bound_are_counted_unlisted),
      cmocka_unit_test(check_waits_for_the_freeing_stream),
      cmocka_unit_test(ordered_check_follows_the_freeing_stream),
      cmocka_unit_test(checks_follow_every_stream_of_a_batch),
      cmocka_unit_test(byte_bound_starts_a_check),
      cmocka_unit_test(a_huge_batch_keeps_the_bins),
      cmocka_unit_test(malformed_knob_fails_the_create),
  };
  return MT_RUN(tests);
}
