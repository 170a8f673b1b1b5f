/* Pinned staging of large pageable copies (issue 10 item 4): round trips of
 * many sizes around the threshold and the buffer size, odd offsets, one and
 * many copy threads, a ring of 2, concurrent staged copies, threshold 0 =
 * off, option checks at create, the capture rules unchanged, counters the
 * same as the direct path, a failed staged-size copy that did nothing, a
 * log callback's copy while its thread holds the ring, overlapping host and
 * device ranges, and wrapping host ranges.
 * Whether a copy was staged is seen in the debug log ("staging ring
 * allocated" on first use). */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

enum { KIB = 1024, MIB = 1024 * 1024 };

/* --- the debug log, to tell staged from direct ------------------------- */

static pthread_mutex_t g_log_mutex = PTHREAD_MUTEX_INITIALIZER;
static int g_ring_lines;
static char g_last_ring_line[512];

static void on_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)user;
  if (strstr(message, "staging ring allocated") != NULL) {
    pthread_mutex_lock(&g_log_mutex);
    ++g_ring_lines;
    snprintf(g_last_ring_line, sizeof g_last_ring_line, "%s", message);
    pthread_mutex_unlock(&g_log_mutex);
  }
}

static void watch_log(void) {
  /* METRALE_LOG (the mutation runner sets warn) would put the level back
   * at each context create, hiding the debug lines counted here. */
  unsetenv("METRALE_LOG");
  g_ring_lines = 0;
  MT_OK(metrale_log_set_level(METRALE_LOG_DEBUG));
  MT_OK(metrale_log_set_callback(on_log, NULL));
}

static int ring_lines(void) {
  pthread_mutex_lock(&g_log_mutex);
  int n = g_ring_lines;
  pthread_mutex_unlock(&g_log_mutex);
  return n;
}

/* The last "staging ring allocated" line (copied: the log may overwrite it). */
static const char* last_ring_line(void) {
  static char copy[sizeof g_last_ring_line];
  pthread_mutex_lock(&g_log_mutex);
  memcpy(copy, g_last_ring_line, sizeof copy);
  pthread_mutex_unlock(&g_log_mutex);
  return copy;
}

static void unwatch_log(void) {
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
}

/* --- helpers ------------------------------------------------------------ */

static metrale_context_t* open_staging(size_t threshold, size_t buffer, uint32_t buffers,
                                       uint32_t threads) {
  metrale_context_options_t o = mt_options();
  o.staging_threshold = threshold;
  o.staging_buffer_bytes = buffer;
  o.staging_buffers = buffers;
  o.staging_threads = threads;
  return mt_open(&o);
}

static unsigned char pattern(size_t i, unsigned seed) {
  return (unsigned char)((i * 131u + (i >> 12) * 7u + seed) & 0xffu);
}

static void fill(unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i) p[i] = pattern(i, seed);
}

/* Index of the first byte that differs from the pattern, or n. */
static size_t first_bad(const unsigned char* p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; ++i)
    if (p[i] != pattern(i, seed)) return i;
  return n;
}

/* Reads device bytes in pieces below any threshold used here (direct copies). */
static void read_direct(metrale_context_t* ctx, metrale_devptr_t p, unsigned char* out, size_t n) {
  const size_t piece = 4000;
  for (size_t off = 0; off < n; off += piece) {
    size_t k = n - off < piece ? n - off : piece;
    MT_OK(metrale_copy_d2h(ctx, p + off, out + off, k));
  }
}

/* h2d of n bytes from host offset hoff into device offset doff (the device
 * block around it holds 0xEE and must keep it), checked through direct
 * reads; then d2h back into a host buffer with guard bytes, checked too.
 * mode 0: synchronous calls; 1: the _async forms plus a synchronize;
 * 2: copy_d2h_on_stream on a created stream. */
static void round_trip(metrale_context_t* ctx, size_t n, size_t hoff, size_t doff, int mode,
                       unsigned seed) {
  const size_t guard = 64;
  const size_t span = doff + n + guard;
  unsigned char* src = malloc(hoff + n);
  unsigned char* back = malloc(hoff + n + guard);
  unsigned char* dev = malloc(span);
  assert_non_null(src);
  assert_non_null(back);
  assert_non_null(dev);
  fill(src + hoff, n, seed);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, span, &d));
  MT_OK(metrale_memset(ctx, d, 0xEE, span));
  metrale_stream_t* s = NULL;
  if (mode == 2) MT_OK(metrale_stream_create(ctx, &s));

  if (mode == 1) {
    MT_OK(metrale_copy_h2d_async(ctx, src + hoff, n, d + doff, NULL));
    /* The caller may reuse src on return (header): the device must get the
     * bytes src held at the call. */
    memset(src + hoff, 0x11, n);
    MT_OK(metrale_stream_synchronize(ctx, NULL));
  } else {
    MT_OK(metrale_copy_h2d(ctx, src + hoff, n, d + doff));
  }
  read_direct(ctx, d, dev, span);
  for (size_t i = 0; i < doff; ++i) assert_int_equal(dev[i], 0xEE);
  size_t bad = first_bad(dev + doff, n, seed);
  if (bad != n) fail_msg("h2d of %zu bytes (host +%zu, device +%zu, mode %d): byte %zu wrong", n, hoff, doff, mode, bad);
  for (size_t i = 0; i < guard; ++i) assert_int_equal(dev[doff + n + i], 0xEE);

  memset(back, 0xCD, hoff + n + guard);
  if (mode == 1) {
    MT_OK(metrale_copy_d2h_async(ctx, d + doff, back + hoff, n, NULL));
    MT_OK(metrale_stream_synchronize(ctx, NULL));
  } else if (mode == 2) {
    MT_OK(metrale_copy_d2h_on_stream(ctx, d + doff, back + hoff, n, s));
  } else {
    MT_OK(metrale_copy_d2h(ctx, d + doff, back + hoff, n));
  }
  for (size_t i = 0; i < hoff; ++i) assert_int_equal(back[i], 0xCD);
  bad = first_bad(back + hoff, n, seed);
  if (bad != n) fail_msg("d2h of %zu bytes (host +%zu, device +%zu, mode %d): byte %zu wrong", n, hoff, doff, mode, bad);
  for (size_t i = 0; i < guard; ++i) assert_int_equal(back[hoff + n + i], 0xCD);

  if (s != NULL) MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_free(ctx, d));
  free(src);
  free(back);
  free(dev);
}

/* --- cases ---------------------------------------------------------------- */

/* Threshold 12 KiB, buffers of 16 KiB, a ring of 2, one thread: sizes one
 * byte around the threshold and around 1, 3 and 5 buffers, odd host and
 * device offsets, in all three call forms. */
static void sizes_around_threshold_and_buffers(void** state) {
  (void)state;
  watch_log();
  const size_t T = 12 * KIB, B = 16 * KIB;
  metrale_context_t* ctx = open_staging(T, B, 2, 1);
  const size_t sizes[] = {T - 1, T, T + 1, B - 1, B, B + 1, 2 * B, 3 * B - 1, 3 * B,
                          3 * B + 1, 5 * B + 7, 17 * B + 4093};
  const size_t offs[][2] = {{0, 0}, {1, 0}, {0, 1}, {3, 5}, {4095, 4097}};
  unsigned seed = 1;
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i)
    for (size_t j = 0; j < sizeof offs / sizeof offs[0]; ++j)
      for (int mode = 0; mode < 3; ++mode)
        round_trip(ctx, sizes[i], offs[j][0], offs[j][1], mode, seed++);
  assert_int_equal(ring_lines(), 1); /* staged, and the ring made once */
  assert_non_null(strstr(last_ring_line(), "streaming stores h2d below 134217728 bytes, "
                                           "cached from there, streaming stores d2h"));
  mt_close(ctx);
  unwatch_log();
}

/* Buffers of 1 MiB split over 1, 2, 3 and 8 threads (parts of >= 256 KiB). */
static void many_threads(void** state) {
  (void)state;
  const uint32_t threads[] = {1, 2, 3, 8};
  for (size_t t = 0; t < sizeof threads / sizeof threads[0]; ++t) {
    metrale_context_t* ctx = open_staging(MIB, MIB, 3, threads[t]);
    const size_t sizes[] = {MIB - 1, MIB, MIB + 1, 5 * MIB + 3, 7 * MIB - 4095};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
      round_trip(ctx, sizes[i], 7, 0, 0, (unsigned)(t * 10 + i));
      round_trip(ctx, sizes[i], 0, 9, 1, (unsigned)(t * 10 + i + 100));
    }
    mt_close(ctx);
  }
}

/* Async copies back to back on two streams, each source overwritten at once:
 * the ring's buffers are still in flight when the next copy wants them. */
static void ring_of_two_back_to_back(void** state) {
  (void)state;
  const size_t B = 8 * KIB, n = 11 * B + 5;
  metrale_context_t* ctx = open_staging(4096, B, 2, 2);
  metrale_stream_t* s[2] = {NULL, NULL};
  MT_OK(metrale_stream_create(ctx, &s[0]));
  MT_OK(metrale_stream_create(ctx, &s[1]));
  enum { COPIES = 8 };
  metrale_devptr_t d[COPIES];
  unsigned char* src = malloc(n);
  assert_non_null(src);
  for (int i = 0; i < COPIES; ++i) {
    MT_OK(metrale_alloc(ctx, n, &d[i]));
    fill(src, n, 40u + (unsigned)i);
    MT_OK(metrale_copy_h2d_async(ctx, src, n, d[i], s[i % 2]));
  }
  memset(src, 0, n);
  MT_OK(metrale_stream_synchronize(ctx, s[0]));
  MT_OK(metrale_stream_synchronize(ctx, s[1]));
  unsigned char* got = malloc(n);
  assert_non_null(got);
  for (int i = 0; i < COPIES; ++i) {
    memset(got, 0, n);
    MT_OK(metrale_copy_d2h_on_stream(ctx, d[i], got, n, s[(i + 1) % 2]));
    assert_int_equal(first_bad(got, n, 40u + (unsigned)i), n);
    MT_OK(metrale_free(ctx, d[i]));
  }
  free(got);
  free(src);
  MT_OK(metrale_stream_destroy(ctx, s[0]));
  MT_OK(metrale_stream_destroy(ctx, s[1]));
  mt_close(ctx);
}

typedef struct worker_arg {
  metrale_context_t* ctx;
  unsigned id;
  int bad;
} worker_arg_t;

static void* copier(void* p) {
  worker_arg_t* a = p;
  const size_t n = 300 * KIB + a->id;
  metrale_stream_t* s = NULL;
  metrale_devptr_t d = 0;
  unsigned char* src = malloc(n);
  unsigned char* got = malloc(n);
  if (src == NULL || got == NULL || metrale_stream_create(a->ctx, &s) != METRALE_OK ||
      metrale_alloc(a->ctx, n, &d) != METRALE_OK) {
    a->bad = 1;
    return NULL;
  }
  for (unsigned it = 0; it < 30 && !a->bad; ++it) {
    const unsigned seed = a->id * 1000u + it;
    fill(src, n, seed);
    if (metrale_copy_h2d_async(a->ctx, src, n, d, s) != METRALE_OK) a->bad = 2;
    memset(got, 0, n);
    if (it % 2 == 0) {
      if (metrale_copy_d2h_on_stream(a->ctx, d, got, n, s) != METRALE_OK) a->bad = 3;
    } else if (metrale_copy_d2h_async(a->ctx, d, got, n, s) != METRALE_OK ||
               metrale_stream_synchronize(a->ctx, s) != METRALE_OK) {
      a->bad = 4;
    }
    if (first_bad(got, n, seed) != n) a->bad = 5;
  }
  metrale_free(a->ctx, d);
  metrale_stream_destroy(a->ctx, s);
  free(src);
  free(got);
  return NULL;
}

/* Six threads copy through one context at once: each copy is staged or,
 * while another holds the ring, direct; every byte arrives either way. */
static void concurrent_staged_copies(void** state) {
  (void)state;
  metrale_context_t* ctx = open_staging(64 * KIB, 64 * KIB, 3, 2);
  enum { N = 6 };
  pthread_t t[N];
  worker_arg_t args[N];
  for (unsigned i = 0; i < N; ++i) {
    args[i] = (worker_arg_t){ctx, i + 1, 0};
    assert_int_equal(pthread_create(&t[i], NULL, copier, &args[i]), 0);
  }
  for (unsigned i = 0; i < N; ++i) {
    pthread_join(t[i], NULL);
    assert_int_equal(args[i].bad, 0);
  }
  mt_close(ctx);
}

/* Threshold 0: never staged (no ring), and the copies still right. */
static void threshold_zero_is_off(void** state) {
  (void)state;
  watch_log();
  metrale_context_t* ctx = open_staging(0, 4096, 2, 2);
  round_trip(ctx, 3 * MIB + 1, 1, 1, 0, 7);
  round_trip(ctx, 3 * MIB + 1, 1, 1, 1, 8);
  assert_int_equal(ring_lines(), 0);
  mt_close(ctx);
  /* The same through the environment variable, over an options threshold. */
  setenv("METRALE_STAGING_THRESHOLD", "0", 1);
  ctx = open_staging(4096, 4096, 2, 2);
  unsetenv("METRALE_STAGING_THRESHOLD");
  round_trip(ctx, 64 * KIB, 0, 0, 0, 9);
  assert_int_equal(ring_lines(), 0);
  mt_close(ctx);
  /* A copy one byte below the threshold is direct, one at it is staged. */
  ctx = open_staging(20000, 4096, 2, 1);
  round_trip(ctx, 19999, 0, 0, 0, 10);
  assert_int_equal(ring_lines(), 0);
  round_trip(ctx, 20000, 0, 0, 0, 11);
  assert_int_equal(ring_lines(), 1);
  mt_close(ctx);
  unwatch_log();
}

static void expect_env_refused(const char* name, const char* value) {
  setenv(name, value, 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* ctx = NULL;
  metrale_status_t st = metrale_context_create(&o, &ctx);
  unsetenv(name);
  if (st == METRALE_OK) {
    metrale_context_destroy(ctx);
    fail_msg("%s=%s was accepted", name, value);
  }
  MT_STATUS(st, METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS(name);
}

static void env_values_checked_at_create(void** state) {
  (void)state;
  expect_env_refused("METRALE_STAGING_BUFFERS", "1");
  expect_env_refused("METRALE_STAGING_BUFFERS", "0");
  expect_env_refused("METRALE_STAGING_THREADS", "0");
  expect_env_refused("METRALE_STAGING_THREADS", "65");
  expect_env_refused("METRALE_STAGING_BUFFER", "4095");
  expect_env_refused("METRALE_STAGING_THRESHOLD", "-1");
  expect_env_refused("METRALE_STAGING_THRESHOLD", "1x");
  expect_env_refused("METRALE_STAGING_STORES", "fast");
  expect_env_refused("METRALE_STAGING_STORES", "Cached");
  expect_env_refused("METRALE_STAGING_STORES", "auto ");
  /* The options struct gets the same checks. */
  metrale_context_options_t o = mt_options();
  o.staging_buffers = 1;
  metrale_context_t* ctx = NULL;
  MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
  o = mt_options();
  o.staging_threads = 0;
  MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
  /* Good values from the environment are used. */
  setenv("METRALE_STAGING_BUFFERS", "2", 1);
  setenv("METRALE_STAGING_THREADS", "3", 1);
  setenv("METRALE_STAGING_BUFFER", "8192", 1);
  setenv("METRALE_STAGING_THRESHOLD", "8192", 1);
  setenv("METRALE_STAGING_STORES", "cached", 1);
  ctx = mt_open(NULL);
  unsetenv("METRALE_STAGING_STORES");
  unsetenv("METRALE_STAGING_BUFFERS");
  unsetenv("METRALE_STAGING_THREADS");
  unsetenv("METRALE_STAGING_BUFFER");
  unsetenv("METRALE_STAGING_THRESHOLD");
  watch_log();
  round_trip(ctx, 5 * 8192 + 1, 3, 0, 0, 12);
  assert_int_equal(ring_lines(), 1);
  assert_non_null(strstr(last_ring_line(), "cached stores h2d below 134217728 bytes, "
                                           "cached from there, cached stores d2h"));
  mt_close(ctx);
  unwatch_log();
}

/* While the stream captures, the capture rules (rule 3) decide, as before,
 * and nothing is staged: the waiting copies are CAPTURE with nothing
 * recorded, copy_h2d_async takes its snapshot, copy_d2h_async is recorded
 * and writes dst at every replay. */
static void capture_rules_unchanged(void** state) {
  (void)state;
  watch_log();
  const size_t n = 100 * KIB + 3;
  metrale_context_t* ctx = open_staging(4096, 8192, 2, 2);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, n, &d));
  MT_OK(metrale_memset(ctx, d, 0, n));
  unsigned char* src = malloc(n);
  unsigned char* out = malloc(n);
  assert_non_null(src);
  assert_non_null(out);
  fill(src, n, 77);
  memset(out, 0xCD, n);
  metrale_counters_t before = mt_counters(ctx);

  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  MT_STATUS(metrale_copy_h2d(ctx, src, n, d), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_copy_d2h(ctx, d, out, n), METRALE_ERROR_CAPTURE);
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, NULL, &g));
  MT_OK(metrale_graph_destroy(ctx, g));
  metrale_counters_t after = mt_counters(ctx);
  assert_int_equal(after.h2d_copies, before.h2d_copies);
  assert_int_equal(after.d2h_copies, before.d2h_copies);

  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_copy_h2d_async(ctx, src, n, d, s));
  memset(src, 0x22, n); /* the graph owns its snapshot */
  MT_OK(metrale_copy_d2h_async(ctx, d, out, n, s));
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  assert_int_equal(ring_lines(), 0);
  for (unsigned c = 0; c < n; ++c) assert_int_equal(out[c], 0xCD); /* recorded, not run */
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(first_bad(out, n, 77), n);
  memset(out, 0, n);
  MT_OK(metrale_graph_launch(ctx, g, s)); /* every replay writes dst */
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_int_equal(first_bad(out, n, 77), n);
  MT_OK(metrale_graph_destroy(ctx, g));
  assert_int_equal(ring_lines(), 0);

  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_stream_destroy(ctx, s));
  free(src);
  free(out);
  mt_close(ctx);
  unwatch_log();
}

/* The same calls through a staging context and a direct one move the
 * counters alike (one copy per call, its bytes, the same waits). */
static void counters_same_as_direct(void** state) {
  (void)state;
  watch_log();
  metrale_context_t* ctx[2] = {open_staging(4096, 8192, 2, 2), open_staging(0, 8192, 2, 2)};
  metrale_counters_t c[2];
  const size_t n = 200 * KIB + 1;
  unsigned char* h = malloc(n);
  assert_non_null(h);
  fill(h, n, 3);
  for (int k = 0; k < 2; ++k) {
    metrale_devptr_t d = 0;
    metrale_stream_t* s = NULL;
    MT_OK(metrale_stream_create(ctx[k], &s));
    MT_OK(metrale_alloc(ctx[k], n, &d));
    MT_OK(metrale_counters_reset(ctx[k]));
    MT_OK(metrale_copy_h2d(ctx[k], h, n, d));
    MT_OK(metrale_copy_h2d_async(ctx[k], h, n, d, s));
    MT_OK(metrale_copy_d2h(ctx[k], d, h, n));
    MT_OK(metrale_copy_d2h_on_stream(ctx[k], d, h, n, s));
    MT_OK(metrale_copy_d2h_async(ctx[k], d, h, n, s));
    MT_OK(metrale_stream_synchronize(ctx[k], s));
    c[k] = mt_counters(ctx[k]);
    MT_OK(metrale_free(ctx[k], d));
    MT_OK(metrale_stream_destroy(ctx[k], s));
  }
  assert_int_equal(ring_lines(), 1); /* the first context staged */
  assert_int_equal(c[0].h2d_copies, 2);
  assert_int_equal(c[0].d2h_copies, 3);
  assert_memory_equal(&c[0], &c[1], sizeof c[0]);
  free(h);
  mt_close(ctx[0]);
  mt_close(ctx[1]);
  unwatch_log();
}

/* Pinned memory never goes through staging (the DMA reads it directly). */
static void pinned_memory_is_not_staged(void** state) {
  (void)state;
  watch_log();
  const size_t n = 256 * KIB;
  metrale_context_t* ctx = open_staging(4096, 8192, 2, 2);
  void* pinned = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, n, &pinned));
  fill(pinned, n, 5);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, n, &d));
  MT_OK(metrale_copy_h2d(ctx, pinned, n, d));
  memset(pinned, 0, n);
  MT_OK(metrale_copy_d2h(ctx, d, pinned, n));
  assert_int_equal(first_bad(pinned, n, 5), n);
  assert_int_equal(ring_lines(), 0);
  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_host_free_pinned(ctx, pinned));
  mt_close(ctx);
  unwatch_log();
}

/* A staged-size copy whose device range runs past its allocation fails as
 * the direct copy does, having written nothing and counted nothing (rule 1):
 * the first pieces, which lie inside, must not have moved. */
static void bad_range_moves_nothing(void** state) {
  (void)state;
  const size_t alloc = 64 * KIB, n = 96 * KIB;
  /* On cuda a range past its allocation gets what the driver answers for
   * the direct copy (staging declines ranges the driver does not vouch for,
   * device_range_known); the host backend refuses it. */
  if (mt_backend() != METRALE_BACKEND_HOST) {
    print_message("skip: the host backend's range check (cuda: the driver's answer)\n");
    skip();
  }
  /* Driver allocations: past a pooled block lies more of its chunk, which
   * the host backend cannot refuse (rule 9); METRALE_POOL overrides the
   * option, so it is set for the create. */
  metrale_context_options_t o = mt_options();
  o.staging_threshold = 4096;
  o.staging_buffer_bytes = 8192;
  o.staging_buffers = 2;
  o.staging_threads = 2;
  metrale_context_t* ctx = NULL;
  MT_OK(mt_create_without_pool(&o, &ctx));
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, alloc, &d));
  MT_OK(metrale_memset(ctx, d, 0xEE, alloc));
  unsigned char* h = malloc(n);
  unsigned char* dev = malloc(alloc);
  assert_non_null(h);
  assert_non_null(dev);
  memset(h, 0x42, n);
  metrale_counters_t before = mt_counters(ctx);
  MT_STATUS(metrale_copy_h2d(ctx, h, n, d), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_h2d_async(ctx, h, n, d + 8192, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2h(ctx, d, h, n), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2h_async(ctx, d + 4, h, n, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  metrale_counters_t after = mt_counters(ctx);
  assert_memory_equal(&before, &after, sizeof before);
  read_direct(ctx, d, dev, alloc);
  for (size_t i = 0; i < alloc; ++i)
    if (dev[i] != 0xEE) fail_msg("device byte %zu written by a failed copy", i);
  for (size_t i = 0; i < n; ++i)
    if (h[i] != 0x42) fail_msg("host byte %zu written by a failed copy", i);
  MT_OK(metrale_free(ctx, d));
  free(h);
  free(dev);
  mt_close(ctx);
}

/* Rule 5: a log callback may call the library. The first staged copy logs
 * "staging ring allocated" once its copy is done and the ring released, so
 * a callback that makes a staged-size copy on the same context neither
 * waits for a ring its own thread holds nor sees the outer copy unfinished. */
static metrale_context_t* g_nested_ctx;
static metrale_devptr_t g_nested_dst;
static unsigned char* g_nested_src;
static size_t g_nested_bytes;
static int g_nested_calls;
static metrale_status_t g_nested_status = METRALE_OK;
/* The outer copy's destination and source: its tail, read in the callback. */
static metrale_devptr_t g_outer_dst;
static const unsigned char* g_outer_src;
static size_t g_outer_bytes;
static int g_outer_done_in_callback;

static void copy_from_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)user;
  if (g_nested_ctx == NULL || strstr(message, "staging ring allocated") == NULL) return;
  metrale_context_t* ctx = g_nested_ctx;
  g_nested_ctx = NULL; /* once */
  ++g_nested_calls;
  unsigned char tail[4096];
  const size_t at = g_outer_bytes - sizeof tail;
  g_outer_done_in_callback =
      metrale_copy_d2h(ctx, g_outer_dst + at, tail, sizeof tail) == METRALE_OK &&
      memcmp(tail, g_outer_src + at, sizeof tail) == 0;
  g_nested_status = metrale_copy_h2d(ctx, g_nested_src, g_nested_bytes, g_nested_dst);
}

static void log_callback_copies_after_the_ring_is_released(void** state) {
  (void)state;
  unsetenv("METRALE_LOG");
  metrale_context_t* ctx = open_staging(64 * KIB, 256 * KIB, 2, 1);
  const size_t n = 1 * MIB, m = 512 * KIB;
  unsigned char* h = malloc(n);
  unsigned char* back = malloc(m);
  assert_non_null(h);
  assert_non_null(back);
  g_nested_src = malloc(m);
  assert_non_null(g_nested_src);
  fill(h, n, 3);
  fill(g_nested_src, m, 9);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, n, &d));
  MT_OK(metrale_alloc(ctx, m, &g_nested_dst));
  g_nested_bytes = m;
  g_nested_calls = 0;
  g_outer_dst = d;
  g_outer_src = h;
  g_outer_bytes = n;
  g_outer_done_in_callback = 0;
  g_nested_ctx = ctx;
  MT_OK(metrale_log_set_level(METRALE_LOG_DEBUG));
  MT_OK(metrale_log_set_callback(copy_from_log, NULL));
  MT_OK(metrale_copy_h2d(ctx, h, n, d));
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  g_nested_ctx = NULL;
  assert_int_equal(g_nested_calls, 1);
  assert_int_equal(g_outer_done_in_callback, 1);
  assert_int_equal(g_nested_status, METRALE_OK);
  read_direct(ctx, g_nested_dst, back, m);
  assert_int_equal(first_bad(back, m, 9), m);
  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_free(ctx, g_nested_dst));
  free(g_nested_src);
  free(h);
  free(back);
  mt_close(ctx);
}

/* On the host backend a device address is a host one, so a caller can hand
 * a copy a host range overlapping its device range (as with managed memory
 * on cuda). Staged or not, the result is memmove's: staging declines such a
 * copy, whose pieces would overwrite source bytes not yet read. */
static void overlapping_ranges_copy_as_memmove(void** state) {
  (void)state;
  if (mt_backend() != METRALE_BACKEND_HOST) {
    print_message("skip: device memory is host memory on the host backend only\n");
    skip();
  }
  const size_t n = 1 * MIB, shift = 64;
  unsigned char* want = malloc(n + shift);
  unsigned char* got = malloc(n + shift);
  assert_non_null(want);
  assert_non_null(got);
  for (int dir = 0; dir < 2; ++dir) {
    for (int sign = 0; sign < 2; ++sign) {
      metrale_context_t* ctx = open_staging(4 * KIB, 16 * KIB, 2, 2);
      metrale_devptr_t d = 0;
      MT_OK(metrale_alloc(ctx, n + shift, &d));
      unsigned char* base = (unsigned char*)(uintptr_t)d;
      fill(base, n + shift, 5);
      memcpy(want, base, n + shift);
      /* sign 0: the destination starts after the source; 1: before it. */
      unsigned char* from = sign == 0 ? base : base + shift;
      unsigned char* to = sign == 0 ? base + shift : base;
      memmove(want + (to - base), want + (from - base), n);
      if (dir == 0) {
        MT_OK(metrale_copy_h2d(ctx, from, n, (metrale_devptr_t)(uintptr_t)to));
      } else {
        MT_OK(metrale_copy_d2h(ctx, (metrale_devptr_t)(uintptr_t)from, to, n));
      }
      memcpy(got, base, n + shift);
      for (size_t i = 0; i < n + shift; ++i) {
        if (got[i] != want[i]) {
          fail_msg("%s, destination %s the source: byte %zu is 0x%02x, memmove gives 0x%02x",
                   dir == 0 ? "h2d" : "d2h", sign == 0 ? "after" : "before", i, got[i], want[i]);
        }
      }
      MT_OK(metrale_free(ctx, d));
      mt_close(ctx);
    }
  }
  free(want);
  free(got);
}

/* A host range that wraps past the end of the address space is refused
 * before anything moves, staged size or not. */
static void wrapping_host_range_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = open_staging(1, 4 * KIB, 2, 1);
  metrale_devptr_t d = 0;
  MT_OK(metrale_alloc(ctx, 64, &d));
  void* end = (void*)(uintptr_t)(UINTPTR_MAX - 7);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_STATUS(metrale_copy_h2d(ctx, end, 16, d), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("wraps");
  MT_STATUS(metrale_copy_h2d_async(ctx, end, 16, d, s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_h2d_async_retained(ctx, end, 16, d, s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2h(ctx, d, end, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("wraps");
  MT_STATUS(metrale_copy_d2h_on_stream(ctx, d, end, 16, s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_d2h_async(ctx, d, end, 16, s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_free(ctx, d));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sizes_around_threshold_and_buffers),
      cmocka_unit_test(many_threads),
      cmocka_unit_test(ring_of_two_back_to_back),
      cmocka_unit_test(concurrent_staged_copies),
      cmocka_unit_test(threshold_zero_is_off),
      cmocka_unit_test(env_values_checked_at_create),
      cmocka_unit_test(capture_rules_unchanged),
      cmocka_unit_test(counters_same_as_direct),
      cmocka_unit_test(pinned_memory_is_not_staged),
      cmocka_unit_test(bad_range_moves_nothing),
      cmocka_unit_test(log_callback_copies_after_the_ring_is_released),
      cmocka_unit_test(overlapping_ranges_copy_as_memmove),
      cmocka_unit_test(wrapping_host_range_is_refused),
  };
  return MT_RUN(tests);
}
