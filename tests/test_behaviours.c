/* Documented behaviours that once had no test failing without them (issue 9
 * item 7): debug_sync, a failed capture query counting as capturing, chunk
 * slack, the pinned-source wait and its once-per-context warning, free/total
 * in the OOM message, the d2d_async failure backtrace; and core's owner check
 * of events, which the host backend's own handle table does not replace. Each case is killed by
 * an entry of scripts/mutations.txt: keep the two in step. The host backend
 * runs work at enqueue, so waits are observed through the stream_syncs
 * counter (kept in core, the same on both backends), not through timing. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

static const metrale_dim3_t ONE = {1, 1, 1};

/* --- log capture --------------------------------------------------------- */

typedef struct {
  pthread_mutex_t lock;
  const char* needle;  /* lines containing it are counted and kept */
  metrale_log_level_t level;
  int hits;
  char last[8192];
} log_grab_t;

static log_grab_t grab = {PTHREAD_MUTEX_INITIALIZER, NULL, METRALE_LOG_OFF, 0, {0}};

static void on_log(metrale_log_level_t level, const char* message, void* user) {
  log_grab_t* g = user;
  pthread_mutex_lock(&g->lock);
  if (message != NULL && g->needle != NULL && strstr(message, g->needle) != NULL) {
    g->hits++;
    g->level = level;
    snprintf(g->last, sizeof g->last, "%s", message);
  }
  pthread_mutex_unlock(&g->lock);
}

static void grab_start(const char* needle, metrale_log_level_t level) {
  pthread_mutex_lock(&grab.lock);
  grab.needle = needle;
  grab.hits = 0;
  grab.level = METRALE_LOG_OFF;
  grab.last[0] = '\0';
  pthread_mutex_unlock(&grab.lock);
  MT_OK(metrale_log_set_level(level));
  MT_OK(metrale_log_set_callback(on_log, &grab));
}

static int grab_hits(void) {
  pthread_mutex_lock(&grab.lock);
  int n = grab.hits;
  pthread_mutex_unlock(&grab.lock);
  return n;
}

static int teardown(void** state) {
  (void)state;
  metrale_log_set_callback(NULL, NULL);
  metrale_log_set_level(METRALE_LOG_WARN);
  unsetenv("METRALE_DEBUG_SYNC");
  return 0;
}

static uint64_t syncs(metrale_context_t* ctx) { return mt_counters(ctx).stream_syncs; }

/* --- debug_sync ------------------------------------------------------------ */

/* Launches empty_kernel n times on s (plain and packed alternately) and
 * returns how many stream waits the launches added. */
static uint64_t syncs_of_launches(metrale_context_t* ctx, metrale_stream_t* s, int n) {
  metrale_kernel_t* k = mt_kernel(ctx, "empty_kernel");
  uint64_t before = syncs(ctx);
  for (int i = 0; i < n; ++i) {
    if (i % 2 == 0) {
      MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, s, NULL));
    } else {
      MT_OK(metrale_launch_packed(ctx, k, ONE, ONE, 0, s, NULL, 0));
    }
  }
  return syncs(ctx) - before;
}

static void debug_sync_waits_after_every_launch(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.debug_sync = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  assert_int_equal(syncs_of_launches(ctx, s, 4), 4);
  assert_int_equal(syncs_of_launches(ctx, NULL, 3), 3);
  assert_int_equal(mt_counters(ctx).launches, 7);
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void without_debug_sync_launches_do_not_wait(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL); /* debug_sync defaults to 0 */
  mt_load_kernels(ctx);
  assert_int_equal(syncs_of_launches(ctx, NULL, 4), 0);
  mt_close(ctx);
}

static void debug_sync_from_the_environment(void** state) {
  (void)state;
  setenv("METRALE_DEBUG_SYNC", "1", 1);
  metrale_context_t* ctx = mt_open(NULL); /* the option says 0; the variable wins */
  unsetenv("METRALE_DEBUG_SYNC");
  mt_load_kernels(ctx);
  assert_int_equal(syncs_of_launches(ctx, NULL, 2), 2);
  mt_close(ctx);
}

/* --- a failed capture query counts as capturing ---------------------------- */

static void failed_capture_query_counts_as_capturing(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_context_t* other = mt_open(NULL);
  metrale_stream_t* s = NULL;
  metrale_stream_t* dead = NULL;
  metrale_stream_t* foreign = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_stream_create(ctx, &dead));
  MT_OK(metrale_stream_create(other, &foreign));
  MT_OK(metrale_stream_destroy(ctx, dead));
  /* A good query says 0: a mutant answering 1 everywhere dies here. */
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);
  assert_int_equal(metrale_stream_is_capturing(ctx, NULL), 0);
  assert_int_equal(metrale_stream_is_capturing(NULL, s), 1);
  assert_int_equal(metrale_stream_is_capturing(ctx, dead), 1);
  assert_int_equal(metrale_stream_is_capturing(ctx, foreign), 1);
  assert_true(metrale_last_error_message()[0] != '\0');
  MT_OK(metrale_stream_destroy(other, foreign));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(other);
  mt_close(ctx);
}

/* A lost context cannot answer; core says "capturing" so that callers keep
 * away from synchronizing. Host only: on a GPU the fault is sticky for the
 * whole process (tests/test_fault.c runs such cases one per process). */
static void lost_context_counts_as_capturing(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  mt_load_kernels(ctx);
  metrale_kernel_t* illegal = mt_kernel(ctx, "illegal_write");
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);
  uint64_t addr = 0x10;
  void* params[] = {&addr};
  metrale_status_t st = metrale_launch(ctx, illegal, ONE, ONE, 0, s, params);
  if (st == METRALE_OK) st = metrale_stream_synchronize(ctx, s);
  MT_STATUS(st, METRALE_ERROR_CONTEXT_LOST);
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 1);
  assert_int_equal(metrale_stream_is_capturing(ctx, NULL), 1);
  mt_close(ctx);
}

/* --- handles of another context --------------------------------------------- */

/* Core checks the owner: each backend numbers its own handles, so another
 * context's handle may name a live object of this one. */
static void foreign_event_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_context_t* other = mt_open(NULL);
  metrale_event_t* mine = NULL;
  metrale_event_t* theirs = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &mine));
  MT_OK(metrale_event_create(other, METRALE_EVENT_DEFAULT, &theirs));
  MT_STATUS(metrale_event_record(ctx, theirs, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("another context");
  MT_STATUS(metrale_event_synchronize(ctx, theirs), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_stream_wait_event(ctx, NULL, theirs), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_destroy(ctx, theirs), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_event_record(ctx, mine, NULL));
  MT_OK(metrale_event_destroy(other, theirs));
  MT_OK(metrale_event_destroy(ctx, mine));
  mt_close(other);
  mt_close(ctx);
}

/* --- chunk slack ------------------------------------------------------------ */

/* The backend's allocation granularity: the host backend rounds to 256 bytes
 * (cuMemAlloc's alignment); the cuda backend counts 512. */
/* The pool rounds to 512 bytes on both backends; the drivers' own
 * allocations are rounded to 256 (host) and 512 (cuda). */
static size_t granularity(metrale_context_t* ctx) {
  return mt_pool_on(ctx) || !mt_is_host(ctx) ? 512 : 256;
}

static size_t round_up(size_t n, size_t g) { return (n + g - 1) / g * g; }

static size_t slack(metrale_context_t* ctx) {
  size_t n = 12345;
  MT_OK(metrale_chunk_slack_bytes(ctx, &n));
  return n;
}

static void slack_is_the_rounding_of_each_size(size_t redzone) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = redzone;
  metrale_context_t* ctx = mt_open(&o);
  const size_t g = granularity(ctx);
  const size_t sizes[] = {1, 100, 255, 256, 257, 511, 512, 1000, 4096, 70001};
  enum { N = sizeof sizes / sizeof sizes[0] };
  metrale_devptr_t p[N];
  size_t want = 0;
  assert_int_equal(slack(ctx), 0);
  for (size_t i = 0; i < N; ++i) {
    MT_OK(metrale_alloc(ctx, sizes[i], &p[i]));
    /* Red-zone pads are reserved too, but are not slack. */
    size_t one = round_up(sizes[i] + redzone, g) - sizes[i] - redzone;
    want += one;
    assert_int_equal(slack(ctx), want);
  }
  /* Frees give back exactly what each allocation added. */
  for (size_t i = 0; i < N; ++i) {
    MT_OK(metrale_free(ctx, p[N - 1 - i]));
    want -= round_up(sizes[N - 1 - i] + redzone, g) - sizes[N - 1 - i] - redzone;
    assert_int_equal(slack(ctx), want);
  }
  assert_int_equal(slack(ctx), 0);
  mt_close(ctx);
}

static void chunk_slack_is_exact(void** state) {
  (void)state;
  slack_is_the_rounding_of_each_size(0);
  slack_is_the_rounding_of_each_size(64);
  slack_is_the_rounding_of_each_size(4096);
}

/* --- h2d_async from pinned memory: the wait and the warning --------------- */

static void pinned_source_wait_is_a_stream_sync(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  enum { BYTES = 1 << 16 };
  unsigned char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, BYTES, (void**)&h));
  unsigned char* expect = malloc(BYTES);
  assert_non_null(expect);
  for (int i = 0; i < BYTES; ++i) h[i] = expect[i] = (unsigned char)(i * 7 + 3);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &d));
  MT_OK(metrale_memset(ctx, d, 0, BYTES));
  /* Queue work ahead of the copy so that, on a GPU, it would run late. */
  MT_OK(metrale_memset_async(ctx, d, 0xEE, BYTES, s));

  uint64_t before = syncs(ctx);
  MT_OK(metrale_copy_h2d_async(ctx, h, BYTES, d, s));
  /* The call waited for s itself: one stream wait, no more. */
  assert_int_equal(syncs(ctx) - before, 1);
  /* So the caller may overwrite the source at once. */
  memset(h, 0x11, BYTES);
  MT_OK(metrale_stream_synchronize(ctx, s));
  unsigned char* got = mt_read_device(ctx, d, BYTES);
  assert_memory_equal(got, expect, BYTES);
  free(got);

  /* Retained and pageable sources do not wait. */
  before = syncs(ctx);
  MT_OK(metrale_copy_h2d_async_retained(ctx, h, BYTES, d, s));
  MT_OK(metrale_copy_h2d_async(ctx, expect, BYTES, d, s));
  assert_int_equal(syncs(ctx) - before, 0);
  MT_OK(metrale_stream_synchronize(ctx, s));

  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_host_free_pinned(ctx, h));
  MT_OK(metrale_stream_destroy(ctx, s));
  free(expect);
  mt_close(ctx);
}

/* Copies from pinned memory k times; returns the warnings logged meanwhile. */
static int pinned_warnings(metrale_context_t* ctx, int k) {
  unsigned char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 256, (void**)&h));
  memset(h, 1, 256);
  unsigned char pageable[256] = {2};
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, 256, &d));
  int before = grab_hits();
  for (int i = 0; i < k; ++i) {
    MT_OK(metrale_copy_h2d_async(ctx, h, 256, d, NULL));
    MT_OK(metrale_copy_h2d_async(ctx, pageable, 256, d, NULL));
  }
  int after = grab_hits();
  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_host_free_pinned(ctx, h));
  return after - before;
}

static void pinned_source_warning_once_per_context(void** state) {
  (void)state;
  metrale_context_t* a = mt_open(NULL);
  metrale_context_t* b = mt_open(NULL);
  grab_start("copy_h2d_async from pinned host memory", METRALE_LOG_TRACE);
  assert_int_equal(pinned_warnings(a, 1), 1);
  assert_int_equal(grab.level, METRALE_LOG_WARN);
  assert_int_equal(pinned_warnings(a, 5), 0);
  /* Once per context, not once per process. */
  assert_int_equal(pinned_warnings(b, 3), 1);
  assert_int_equal(mt_counters(a).pinned_source_waits, 6);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  mt_close(b);
  mt_close(a);
}

/* --- OUT_OF_MEMORY names the device's free and total memory --------------- */

static void oom_message_names_free_and_total(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  size_t total = 0;
  MT_OK(metrale_total_memory(ctx, &total));
  assert_true(total > 0);
  char total_text[64];
  snprintf(total_text, sizeof total_text, " of %.1f GiB",
           (double)total / (1024.0 * 1024.0 * 1024.0));
  metrale_devptr_t p = 0;
  /* More than any device or host has; 1 << 50 still leaves room for pads. */
  MT_STATUS(metrale_alloc_at(ctx, (size_t)1 << 50, "oom_site.c", 5, &p),
            METRALE_ERROR_OUT_OF_MEMORY);
  const char* msg = metrale_last_error_message();
  MT_MESSAGE_HAS("oom_site.c:5");
  MT_MESSAGE_HAS("device free ");
  MT_MESSAGE_HAS(total_text);
  /* Free memory was asked for, not left at zero. */
  const char* free_at = strstr(msg, "device free ");
  assert_non_null(free_at);
  assert_true(strncmp(free_at + strlen("device free "), "0 B", 3) != 0);
  assert_true(free_at[strlen("device free ")] >= '1' && free_at[strlen("device free ")] <= '9');
  mt_close(ctx);
}

/* --- a failed d2d_async logs a backtrace ------------------------------------ */

/* The backend must refuse the copy (core's bounds check is off). The host
 * backend refuses an address it never handed out; cuMemcpyDtoDAsync refuses
 * 0x10 at enqueue (invalid value). Kept the last case: should a driver take
 * the copy and fault later, no case after it would inherit the fault. */

static void d2d_async_failure_logs_a_backtrace(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 0; /* the backend, not core's bounds check, refuses */
  metrale_context_t* ctx = mt_open(&o);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  grab_start("copy_d2d_async failed", METRALE_LOG_ERROR);
  metrale_status_t st = metrale_copy_d2d_async(ctx, 0x10, p, 16, s);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_true(st != METRALE_OK);
  assert_int_equal(grab_hits(), 1);
  assert_int_equal(grab.level, METRALE_LOG_ERROR);
  /* The error itself, then one indented frame a line, down to this test. */
  int frames = 0;
  for (const char* c = grab.last; (c = strstr(c, "\n  ")) != NULL; ++c) ++frames;
  if (frames < 3 || strstr(grab.last, "test_behaviours") == NULL) {
    print_message("log line: %s\n", grab.last);
  }
  assert_true(frames >= 3);
  assert_non_null(strstr(grab.last, "test_behaviours"));
  /* A copy that succeeds logs nothing. */
  grab_start("copy_d2d_async failed", METRALE_LOG_ERROR);
  MT_OK(metrale_copy_d2d_async(ctx, p, p + 32, 16, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(grab_hits(), 0);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(debug_sync_waits_after_every_launch, teardown),
      cmocka_unit_test_teardown(without_debug_sync_launches_do_not_wait, teardown),
      cmocka_unit_test_teardown(debug_sync_from_the_environment, teardown),
      cmocka_unit_test_teardown(failed_capture_query_counts_as_capturing, teardown),
      cmocka_unit_test_teardown(lost_context_counts_as_capturing, teardown),
      cmocka_unit_test_teardown(foreign_event_is_refused, teardown),
      cmocka_unit_test_teardown(chunk_slack_is_exact, teardown),
      cmocka_unit_test_teardown(pinned_source_wait_is_a_stream_sync, teardown),
      cmocka_unit_test_teardown(pinned_source_warning_once_per_context, teardown),
      cmocka_unit_test_teardown(oom_message_names_free_and_total, teardown),
      cmocka_unit_test_teardown(d2d_async_failure_logs_a_backtrace, teardown),
  };
  return MT_RUN(tests);
}
