/* The freed-memory quarantine: freed blocks are filled and held back within
 * a budget, and a scan names who allocated and who freed a block a kernel
 * wrote after its free. Runs with the pool on and off. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>
#include <string.h>

#include "launch_thread.h"
#include "test_support.h"

#define PAD 64

static metrale_context_t* open_quarantine(size_t budget) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  o.quarantine_bytes = budget;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  return ctx;
}

static size_t quarantined(metrale_context_t* ctx) {
  return (size_t)mt_pool_stats(ctx).quarantined_bytes;
}

static void freed_blocks_are_held_back(void** state) {
  (void)state;
  metrale_context_t* ctx = open_quarantine(1u << 20);
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(metrale_free(ctx, a));
  assert_int_equal(quarantined(ctx), 4096 + PAD);
  assert_int_equal(mt_ledger(ctx).count, 0);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.frees, 1);
  assert_int_equal(c.free_bytes, 4096);
  /* Not handed out again while quarantined. */
  MT_OK(metrale_alloc(ctx, 4096, &b));
  assert_true(b != a);
  /* Its buffer filled with the pattern (the pad keeps the red-zone one). */
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  size_t n = 99;
  MT_OK(metrale_quarantine_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  MT_OK(metrale_free(ctx, b));
  mt_close(ctx);
}

static void a_write_after_free_names_both_sites(void** state) {
  (void)state;
  metrale_context_t* ctx = open_quarantine(1u << 20);
  metrale_devptr_t keep = 0, p = 0;
  MT_OK(metrale_alloc(ctx, 256, &keep));
  const int alloc_line = __LINE__ + 1;
  MT_OK(metrale_alloc(ctx, 1024, &p));
  const int free_line = __LINE__ + 1;
  MT_OK(metrale_free(ctx, p));
  /* A kernel writes 16 u32 through the stale pointer. */
  MT_OK(mt_fill_u32(ctx, NULL, p, 0x01020304u, 16));
  metrale_use_after_free_t u[2];
  size_t n = 0;
  MT_STATUS(metrale_quarantine_scan(ctx, u, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("written after free");
  MT_MESSAGE_HAS("freed at");
  assert_int_equal(n, 1);
  assert_int_equal(u[0].ptr, p);
  assert_int_equal(u[0].bytes, 1024);
  assert_int_equal(u[0].first_bad_offset, 0);
  assert_int_equal(u[0].bad_bytes, 64);
  assert_int_equal(u[0].found, 0x04);
  assert_non_null(strstr(u[0].alloc_file, "test_quarantine.c"));
  assert_int_equal(u[0].alloc_line, alloc_line);
  assert_non_null(strstr(u[0].free_file, "test_quarantine.c"));
  assert_int_equal(u[0].free_line, free_line);
  /* The red-zone scan lists it too, with the quarantine's pattern. */
  metrale_redzone_violation_t v[2];
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].expected, METRALE_QUARANTINE_PATTERN);
  assert_int_equal(v[0].line, alloc_line);
  MT_MESSAGE_HAS("written after its free"); /* not "past the end": offset 0 of the buffer */
  MT_MESSAGE_HAS("offset 0 of the buffer");
  /* The live block's pad is clean: only the freed one is reported. */
  MT_OK(metrale_free(ctx, keep));
  mt_close(ctx);
}

static void the_budget_pushes_out_the_oldest(void** state) {
  (void)state;
  const size_t span = 4096 + PAD;
  metrale_context_t* ctx = open_quarantine(3 * span);
  metrale_devptr_t p[5];
  for (int i = 0; i < 5; ++i) MT_OK(metrale_alloc(ctx, 4096, &p[i]));
  for (int i = 0; i < 5; ++i) MT_OK(metrale_free(ctx, p[i]));
  assert_int_equal(quarantined(ctx), 3 * span); /* p[0], p[1] went back */
  /* A write into a block that left the quarantine is not reported: it is
   * nobody's memory any more as far as the quarantine knows. */
  size_t n = 0;
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_quarantine_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  /* A block larger than the whole budget is not quarantined. */
  metrale_devptr_t big = 0;
  MT_OK(metrale_alloc(ctx, 4 * span, &big));
  MT_OK(metrale_free(ctx, big));
  assert_int_equal(quarantined(ctx), 3 * span);
  mt_close(ctx); /* quarantined blocks go back at destroy (ASan: no leak) */
}

static void off_without_red_zones_or_budget(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.quarantine_bytes = 1u << 20; /* red zones off: no quarantine */
  metrale_context_t* ctx = mt_open(&o);
  metrale_devptr_t a = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(metrale_free(ctx, a));
  assert_int_equal(quarantined(ctx), 0);
  size_t n = 7;
  MT_OK(metrale_quarantine_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  mt_close(ctx);
  /* The variable turns it on and is parsed strictly. */
  setenv("METRALE_QUARANTINE", "65536", 1);
  setenv("METRALE_REDZONE", "64", 1);
  ctx = mt_open(NULL);
  MT_OK(metrale_alloc(ctx, 100, &a));
  MT_OK(metrale_free(ctx, a));
  assert_int_equal(quarantined(ctx), 164);
  mt_close(ctx);
  setenv("METRALE_QUARANTINE", "64k", 1);
  metrale_context_t* bad = NULL;
  MT_STATUS(metrale_context_create(NULL, &bad), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("METRALE_QUARANTINE");
  unsetenv("METRALE_QUARANTINE");
  unsetenv("METRALE_REDZONE");
}

static void the_0_1_free_has_no_site(void** state) {
  (void)state;
  metrale_context_t* ctx = open_quarantine(1u << 20);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 512, &p));
#undef metrale_free
  MT_OK(metrale_free(ctx, p)); /* the exported symbol a 0.1 binary calls */
  MT_OK(mt_fill_u32(ctx, NULL, p, 7, 1));
  metrale_use_after_free_t u;
  size_t n = 0;
  MT_STATUS(metrale_quarantine_scan(ctx, &u, 1, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_string_equal(u.free_file, "<unknown>");
  assert_int_equal(u.bad_bytes, 4);
  /* Bad arguments. */
  MT_STATUS(metrale_quarantine_scan(ctx, NULL, 1, &n), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_quarantine_scan(ctx, &u, 1, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_quarantine_scan(NULL, &u, 1, &n), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

/* A block quarantined on a stream that is destroyed before the block leaves
 * the quarantine goes back on the default stream: the dead stream's handle
 * is never used again (it held an event record on a destroyed stream, and
 * the block stayed handed out in the pool). */
static void a_destroyed_stream_does_not_strand_its_quarantined_blocks(void** state) {
  (void)state;
  const size_t span = 4096 + PAD;
  metrale_context_t* ctx = open_quarantine(span);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_async(ctx, 4096, s, &a));
  MT_OK(metrale_free_async(ctx, a, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_alloc(ctx, 4096, &b));
  MT_OK(metrale_free(ctx, b)); /* pushes a out of the quarantine */
  assert_int_equal(quarantined(ctx), span);
  size_t found = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &found)); /* a's pad check: then a is back */
  metrale_pool_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  MT_OK(metrale_pool_stats(ctx, &st));
  if (st.enabled) assert_int_equal(st.blocks_in_use, 1); /* b only: a went back */
  /* a's chunk must be whole again on a live stream: a trim of everything
   * but b's chunk gives nothing back only if a is stranded on the dead
   * stream, and an allocation of a's size on the default stream takes a. */
  metrale_devptr_t c = 0;
  MT_OK(metrale_alloc(ctx, 4096, &c));
  if (st.enabled) assert_int_equal(c, a);
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  MT_OK(metrale_free(ctx, c));
  mt_close(ctx);
}

static metrale_pool_stats_t pool_stats(metrale_context_t* ctx) {
  metrale_pool_stats_t s;
  memset(&s, 0, sizeof s);
  s.struct_size = sizeof s;
  MT_OK(metrale_pool_stats(ctx, &s));
  return s;
}

/* An overrun into the pad before the free: the quarantine fills the buffer
 * only, so the pad keeps the evidence. A red-zone scan reports it once (as
 * a pad, expected METRALE_REDZONE_PATTERN); the quarantine scan does not
 * (the buffer is clean); when the block leaves the quarantine its pad check
 * does not report it again. Once the fill covered the pad and no scan ever
 * reported such an overrun. */
static void an_overrun_before_a_quarantined_free_is_reported_once(void** state) {
  (void)state;
  const size_t span = 100 + PAD;
  metrale_context_t* ctx = open_quarantine(span);
  metrale_devptr_t p = 0, q = 0;
  const int alloc_line = __LINE__ + 1;
  MT_OK(metrale_alloc(ctx, 100, &p));
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + 100 + 3));
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(quarantined(ctx), span);
  size_t n = 0;
  MT_OK(metrale_quarantine_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  metrale_redzone_violation_t v[2];
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("past the end");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].bytes, 100);
  assert_int_equal(v[0].line, alloc_line);
  assert_int_equal(v[0].expected, METRALE_REDZONE_PATTERN);
  assert_int_equal(v[0].first_bad_offset, 3);
  assert_int_equal(v[0].bad_bytes, 1);
  assert_int_equal(v[0].found, 0x5a);
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n)); /* once */
  assert_int_equal(n, 0);
  /* Out of the quarantine (q pushes it), through its pad check: quiet. */
  MT_OK(metrale_alloc(ctx, 100, &q));
  MT_OK(metrale_free(ctx, q));
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  if (pool_stats(ctx).enabled) assert_int_equal(pool_stats(ctx).pads_overwritten, 1);
  mt_close(ctx);
}

/* A write after free that no scan saw before the destroy: the destroy
 * logs it with both sites before the quarantine lets the block go. */
static void the_destroy_reports_writes_no_scan_saw(void** state) {
  (void)state;
  metrale_context_t* ctx = open_quarantine(1u << 20);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 1024, "q_alloc.c", 5, &p));
  MT_OK(metrale_free_at(ctx, p, "q_free.c", 6));
  MT_OK(mt_fill_u32(ctx, NULL, p, 0x01020304u, 4));
  mt_keep_errors();
  mt_close(ctx);
  mt_stop_keeping_errors();
  assert_non_null(strstr(mt_errors(), "written after its free (found at the context's destroy)"));
  assert_non_null(strstr(mt_errors(), "allocated at q_alloc.c:5, freed at q_free.c:6"));
  assert_non_null(strstr(mt_errors(), "16 bytes changed, the first at offset 0 of the buffer"));
}

/* The same overrun with no scan while the block is quarantined: its pad
 * check, when the block leaves the quarantine, reports it with the site
 * that freed it (pool on: raw allocations get no check at their free). */
static void an_overrun_is_caught_when_its_block_leaves_the_quarantine(void** state) {
  (void)state;
  const size_t span = 100 + PAD;
  metrale_context_t* ctx = open_quarantine(span);
  if (!pool_stats(ctx).enabled) {
    mt_close(ctx);
    skip();
  }
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_alloc(ctx, 100, &p));
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + 100));
  MT_OK(metrale_free_at(ctx, p, "quarantine_free.c", 88));
  MT_OK(metrale_alloc(ctx, 100, &q));
  MT_OK(metrale_free(ctx, q)); /* p leaves the quarantine */
  size_t n = 0;
  metrale_redzone_violation_t v[2];
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_MESSAGE_HAS("freed at quarantine_free.c:88");
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_int_equal(v[0].expected, METRALE_REDZONE_PATTERN);
  assert_int_equal(pool_stats(ctx).pads_overwritten, 1);
  mt_close(ctx);
}

/* A host kernel on s, queued before the free, that keeps using the block
 * after the free returned: it reads its input, then writes its output. */
typedef struct {
  metrale_stream_t* s;
  metrale_devptr_t p;
  int started, freed;
  unsigned char seen;
} late_use_t;

static metrale_status_t late_user(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  late_use_t* u = user;
  __atomic_store_n(&u->started, 1, __ATOMIC_SEQ_CST);
  mt_wait_flag(&u->freed);
  unsigned char* p = (unsigned char*)(uintptr_t)u->p;
  u->seen = p[0];
  p[1] = 0x22;
  return METRALE_OK;
}

/* Rule 9: work queued before the free on a stream marked with
 * record_stream (or on the block's own stream, when another stream frees
 * it) may still use the block. The quarantine fills it only after that
 * work, without the free waiting for it: the kernel reads its data, its
 * write is no use after free, and once filled the block is watched. */
static metrale_context_t* open_quarantine_without_pool(size_t budget);

/* variant 0: freed on another stream than its own; 1: marked with
 * record_stream; 2: the pool off, where a driver free waits for every
 * stream, so the fill does too (without the free waiting). */
static void work_queued_before_the_free_on_other_streams_keeps_the_block(void** state) {
  (void)state;
  for (int variant = 0; variant <= 2; ++variant) {
    const int marked = variant == 1;
    metrale_context_t* ctx =
        variant == 2 ? open_quarantine_without_pool(1u << 20) : open_quarantine(1u << 20);
    mt_require_host(ctx);
    if (variant < 2 && !mt_pool_on(ctx)) {
      mt_close(ctx); /* record_stream and a block's own stream are the pool's */
      continue;
    }
    late_use_t u;
    memset(&u, 0, sizeof u);
    metrale_stream_t* other = NULL;
    MT_OK(metrale_stream_create(ctx, &u.s));
    MT_OK(metrale_stream_create(ctx, &other));
    MT_OK(metrale_module_register_host(ctx, "quarantine", "late_user", late_user, &u));
    if (marked) {
      MT_OK(metrale_alloc(ctx, 1000, &u.p));
      MT_OK(metrale_memset(ctx, u.p, 0x11, 1000));
      MT_OK(metrale_record_stream(ctx, u.p, u.s));
    } else {
      MT_OK(metrale_alloc_async(ctx, 1000, u.s, &u.p));
      MT_OK(metrale_memset(ctx, u.p, 0x11, 1000));
    }
    mt_launch_thread_t runner;
    mt_launch_thread_start(&runner, ctx, "quarantine", "late_user", u.s, &u.started);
    if (variant == 0) {
      MT_OK(metrale_free_async(ctx, u.p, other));
    } else {
      MT_OK(metrale_free(ctx, u.p));
    }
    __atomic_store_n(&u.freed, 1, __ATOMIC_SEQ_CST);
    MT_OK(mt_launch_thread_join(&runner));
    assert_int_equal(u.seen, 0x11);
    size_t n = 99;
    MT_OK(metrale_quarantine_scan(ctx, NULL, 0, &n));
    assert_int_equal(n, 0);
    /* s is done with it: the scan filled it, and a later write is caught. */
    unsigned char* p = (unsigned char*)(uintptr_t)u.p;
    assert_int_equal(p[0], METRALE_QUARANTINE_PATTERN);
    p[2] = 0x33;
    MT_STATUS(metrale_quarantine_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
    assert_int_equal(n, 1);
    p[2] = METRALE_QUARANTINE_PATTERN;
    MT_OK(metrale_stream_destroy(ctx, other));
    MT_OK(metrale_stream_destroy(ctx, u.s));
    mt_close(ctx);
  }
}

static metrale_context_t* open_quarantine_without_pool(size_t budget) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = PAD;
  o.quarantine_bytes = budget;
  metrale_context_t* ctx = NULL;
  MT_OK(mt_create_without_pool(&o, &ctx));
  mt_load_kernels(ctx);
  return ctx;
}

/* An overrun no scan saw, of a block still quarantined at the destroy: the
 * destroy logs it with both sites, with the pool off too (where no freed-pad
 * check follows the quarantine). */
static void the_destroy_logs_a_quarantined_blocks_overwritten_pad(void** state) {
  (void)state;
  for (int pool = 0; pool <= 1; ++pool) {
    metrale_context_t* ctx =
        pool ? open_quarantine(1u << 20) : open_quarantine_without_pool(1u << 20);
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc_at(ctx, 100, "qp_alloc.c", 7, &p));
    const unsigned char junk = 0x5a;
    MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + 100));
    MT_OK(metrale_free_at(ctx, p, "qp_free.c", 8));
    mt_keep_errors();
    mt_close(ctx);
    mt_stop_keeping_errors();
    assert_non_null(strstr(mt_errors(), "red-zone pad overwritten before its free"));
    assert_non_null(strstr(mt_errors(), "allocated at qp_alloc.c:7, freed at qp_free.c:8"));
  }
}

/* Pool off: the pool's figures are 0, the freed-pad ones too (a scan that
 * finds a quarantined pad overwritten counts nothing there), but the
 * quarantine still holds the driver allocation back and says so. */
static void with_the_pool_off_only_the_quarantine_is_counted(void** state) {
  (void)state;
  metrale_context_t* ctx = open_quarantine_without_pool(1u << 20);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 100, &p));
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, p + 100));
  MT_OK(metrale_free(ctx, p));
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  const metrale_pool_stats_t s = pool_stats(ctx);
  assert_int_equal(s.enabled, 0);
  assert_int_equal(s.reserved_bytes, 0);
  assert_int_equal(s.pad_fills, 0);
  assert_int_equal(s.pad_checks, 0);
  assert_int_equal(s.pads_checked, 0);
  assert_int_equal(s.pads_overwritten, 0);
  assert_int_equal(s.pads_pending, 0);
  assert_int_equal(s.quarantined_bytes, 100 + PAD);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(freed_blocks_are_held_back),
      cmocka_unit_test(a_write_after_free_names_both_sites),
      cmocka_unit_test(the_destroy_reports_writes_no_scan_saw),
      cmocka_unit_test(the_budget_pushes_out_the_oldest),
      cmocka_unit_test(off_without_red_zones_or_budget),
      cmocka_unit_test(the_0_1_free_has_no_site),
      cmocka_unit_test(a_destroyed_stream_does_not_strand_its_quarantined_blocks),
      cmocka_unit_test(an_overrun_before_a_quarantined_free_is_reported_once),
      cmocka_unit_test(an_overrun_is_caught_when_its_block_leaves_the_quarantine),
      cmocka_unit_test(with_the_pool_off_only_the_quarantine_is_counted),
      cmocka_unit_test(the_destroy_logs_a_quarantined_blocks_overwritten_pad),
      cmocka_unit_test(work_queued_before_the_free_on_other_streams_keeps_the_block),
  };
  return MT_RUN(tests);
}
