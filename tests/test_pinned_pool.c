/* The pinned host pool (opts.pinned_pool, METRALE_PINNED_POOL): freed
 * pinned blocks are kept by size class and handed out again without a
 * backend call, while every context answers for a freed block exactly as
 * without the pool (not pinned, no device pointer, a second free NOT_FOUND).
 *
 * Which calls reach the backend is seen through the host backend's test
 * hook METRALE_TEST_HOST_FAIL_PINNED=<n> (the n-th backend pinned
 * allocation fails): a call the pool serves cannot fail. Those cases skip
 * on cuda. Contents are never assumed: every check writes what it reads. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "test_support.h"

#define MIB ((size_t)1 << 20)

static metrale_context_t* open_pool(int on) {
  metrale_context_options_t o = mt_options();
  o.pinned_pool = on;
  return mt_open(&o);
}

/* A context whose n-th backend pinned allocation fails (host backend). */
static metrale_context_t* open_failing_at(int pool_on, const char* n) {
  setenv("METRALE_TEST_HOST_FAIL_PINNED", n, 1);
  metrale_context_t* ctx = open_pool(pool_on);
  unsetenv("METRALE_TEST_HOST_FAIL_PINNED");
  return ctx;
}

/* Skips the case (closing ctx) unless the hook above is there. */
static void require_fail_hook(metrale_context_t* ctx) {
  if (!mt_is_host(ctx)) {
    mt_close(ctx);
    print_message("skip: counts backend calls with METRALE_TEST_HOST_FAIL_PINNED, a host-backend "
                  "test hook\n");
    skip();
  }
}

static int ctx_pinned(metrale_context_t* ctx, const void* p, size_t bytes) {
  int yes = -1;
  MT_OK(metrale_host_is_pinned(ctx, p, bytes, &yes));
  return yes;
}

static void reuse_returns_the_same_block_per_class(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  void *a = NULL, *b = NULL, *c = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &a));
  MT_OK(metrale_host_free_pinned(ctx, a));
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &b));
  assert_ptr_equal(a, b);
  MT_OK(metrale_host_free_pinned(ctx, b));
  /* 1000 and 3000 bytes share the 4 KiB class. */
  MT_OK(metrale_host_alloc_pinned(ctx, 1000, &a));
  MT_OK(metrale_host_free_pinned(ctx, a));
  MT_OK(metrale_host_alloc_pinned(ctx, 3000, &b));
  assert_ptr_equal(a, b);
  /* Another class does not take it: 1 MiB is still cached, 8 KiB is new. */
  MT_OK(metrale_host_alloc_pinned(ctx, 8192, &c));
  assert_ptr_not_equal(c, a);
  void* d = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, MIB - 4096, &d)); /* the 1 MiB class */
  assert_ptr_not_equal(d, b);
  memset(b, 0x11, 3000);
  memset(c, 0x22, 8192);
  memset(d, 0x33, MIB - 4096);
  MT_OK(metrale_host_free_pinned(ctx, b));
  MT_OK(metrale_host_free_pinned(ctx, c));
  MT_OK(metrale_host_free_pinned(ctx, d));
  mt_close(ctx);
}

static void freed_block_answers_as_before(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  metrale_context_t* obs = mt_open(NULL);
  char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 64 * 1024, (void**)&h));
  assert_int_equal(ctx_pinned(ctx, h, 64 * 1024), 1);
  MT_OK(metrale_host_free_pinned(ctx, h));
  /* The driver still holds it (cached), but every context answers as
   * without the pool: this one and another one, which asks the driver. */
  assert_int_equal(ctx_pinned(ctx, h, 1), 0);
  assert_int_equal(ctx_pinned(ctx, h + 100, 200), 0);
  assert_int_equal(ctx_pinned(obs, h, 64 * 1024), 0);
  assert_int_equal(ctx_pinned(obs, h + 100, 200), 0);
  metrale_devptr_t d = 0;
  MT_STATUS(metrale_host_device_pointer(obs, h, &d), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_host_device_pointer(ctx, h, &d), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_host_device_pointer(ctx, h + 4096, &d), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_host_free_pinned(ctx, h), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_host_free_pinned(ctx, h + 64), METRALE_ERROR_NOT_FOUND);
  /* A stale pointer cannot register the cached block as its own. */
  MT_STATUS(metrale_host_register(ctx, h, 4096), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("freed by metrale_host_free_pinned");
  MT_STATUS(metrale_host_register(obs, h + 4096, 4096), METRALE_ERROR_INVALID_ARGUMENT);
  /* Handed out again it is pinned memory of this context once more. */
  char* again = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 64 * 1024, (void**)&again));
  assert_ptr_equal(again, h);
  assert_int_equal(ctx_pinned(ctx, again, 64 * 1024), 1);
  assert_int_equal(ctx_pinned(obs, again, 64 * 1024), 1); /* the driver's answer */
  MT_OK(metrale_host_device_pointer(ctx, again + 10, &d));
  assert_true(d != 0);
  MT_OK(metrale_host_free_pinned(ctx, again));
  mt_close(obs);
  mt_close(ctx);
}

/* A request rounded up to its class: the bytes past those asked were never
 * the caller's pinned memory, so they answer as they did without the pool. */
static void class_slack_is_not_pinned(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  char* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 1000, (void**)&h));
  assert_int_equal(ctx_pinned(ctx, h, 1000), 1);
  assert_int_equal(ctx_pinned(ctx, h + 900, 200), 0);
  assert_int_equal(ctx_pinned(ctx, h + 2000, 1), 0);
  metrale_context_t* obs = mt_open(NULL);
  assert_int_equal(ctx_pinned(obs, h, 1000), 1);
  assert_int_equal(ctx_pinned(obs, h + 900, 200), 0);
  mt_close(obs);
  metrale_devptr_t d = 0;
  MT_OK(metrale_host_device_pointer(ctx, h + 999, &d));
  MT_STATUS(metrale_host_device_pointer(ctx, h + 1000, &d), METRALE_ERROR_NOT_FOUND);
  /* Nor can it be registered: the message says why, not "freed". */
  MT_STATUS(metrale_host_register(ctx, h + 1000, 10), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("slack past the bytes asked of a live metrale_host_alloc_pinned block");
  MT_OK(metrale_host_free_pinned(ctx, h));
  mt_close(ctx);
}

/* The second backend pinned allocation fails: with the pool the second
 * alloc is a hit and never gets there; without it, it does. */
static void check_backend_calls(metrale_context_t* ctx, int pool_on) {
  void *h = NULL, *again = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &h));
  memset(h, 0x44, MIB);
  MT_OK(metrale_host_free_pinned(ctx, h));
  if (pool_on) {
    MT_OK(metrale_host_alloc_pinned(ctx, MIB, &again));
    assert_ptr_equal(again, h);
    MT_OK(metrale_host_free_pinned(ctx, again));
  } else {
    MT_STATUS(metrale_host_alloc_pinned(ctx, MIB, &again), METRALE_ERROR_OUT_OF_MEMORY);
    MT_MESSAGE_HAS("METRALE_TEST_HOST_FAIL_PINNED");
  }
}

static void hit_makes_no_backend_call(void** state) {
  (void)state;
  metrale_context_t* ctx = open_failing_at(1, "2");
  require_fail_hook(ctx);
  check_backend_calls(ctx, 1);
  mt_close(ctx);
}

static void pool_off_by_option(void** state) {
  (void)state;
  metrale_context_t* ctx = open_failing_at(0, "2");
  require_fail_hook(ctx);
  check_backend_calls(ctx, 0);
  mt_close(ctx);
}

static void pool_off_by_env(void** state) {
  (void)state;
  setenv("METRALE_PINNED_POOL", "0", 1);
  metrale_context_t* ctx = open_failing_at(1, "2"); /* the environment overrides */
  unsetenv("METRALE_PINNED_POOL");
  require_fail_hook(ctx);
  check_backend_calls(ctx, 0);
  mt_close(ctx);
}

/* Out of pinned memory (the hook's 2nd backend call) with a block cached:
 * the cache goes back to the backend and the allocation is tried again. */
static void oom_gives_the_cache_back_and_retries(void** state) {
  (void)state;
  metrale_context_t* ctx = open_failing_at(1, "2");
  require_fail_hook(ctx);
  void *small = NULL, *big = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 64 * 1024, &small));
  MT_OK(metrale_host_free_pinned(ctx, small));
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &big)); /* 2nd call fails, 3rd succeeds */
  memset(big, 0x55, MIB);
  void* again = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, 64 * 1024, &again)); /* a miss now: cache was freed */
  MT_OK(metrale_host_free_pinned(ctx, again));
  MT_OK(metrale_host_free_pinned(ctx, big));
  mt_close(ctx);
  /* Nothing cached: the failure is the caller's. */
  ctx = open_failing_at(1, "1");
  MT_STATUS(metrale_host_alloc_pinned(ctx, MIB, &big), METRALE_ERROR_OUT_OF_MEMORY);
  MT_MESSAGE_HAS("METRALE_TEST_HOST_FAIL_PINNED");
  mt_close(ctx);
}

/* The budget is 256 MiB of cached blocks: the fifth 64 MiB block pushes the
 * oldest out to the backend. The four kept come back newest first without
 * a backend call; the next one needs the backend (its 6th call fails). */
static void budget_overflow_frees_oldest(void** state) {
  (void)state;
  metrale_context_t* ctx = open_failing_at(1, "6");
  const int host = mt_is_host(ctx);
  enum { N = 5 };
  void *b[N], *again[N];
  for (int i = 0; i < N; ++i) MT_OK(metrale_host_alloc_pinned(ctx, 64 * MIB, &b[i]));
  for (int i = 0; i < N; ++i) MT_OK(metrale_host_free_pinned(ctx, b[i]));
  for (int i = N - 1; i >= 1; --i) {
    MT_OK(metrale_host_alloc_pinned(ctx, 64 * MIB, &again[i]));
    assert_ptr_equal(again[i], b[i]);
  }
  if (host) {
    MT_STATUS(metrale_host_alloc_pinned(ctx, 64 * MIB, &again[0]), METRALE_ERROR_OUT_OF_MEMORY);
  } else {
    MT_OK(metrale_host_alloc_pinned(ctx, 64 * MIB, &again[0]));
    MT_OK(metrale_host_free_pinned(ctx, again[0]));
  }
  for (int i = 1; i < N; ++i) MT_OK(metrale_host_free_pinned(ctx, again[i]));
  mt_close(ctx);
}

static int trim_lines = 0;
static void count_trim_lines(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)user;
  if (strstr(message, "pinned pool: trimmed to 0 B: freed 2 cached blocks") != NULL) ++trim_lines;
}

/* Destroying the context frees what it cached, through the backend (the
 * host backend would free a leftover block with itself, so the pool's own
 * release is watched in its debug line). */
static void destroy_frees_cached_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  metrale_context_t* obs = mt_open(NULL);
  void *a = NULL, *b = NULL, *c = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &a));
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, &b));
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, &c));
  MT_OK(metrale_host_free_pinned(ctx, a));
  MT_OK(metrale_host_free_pinned(ctx, b));
  trim_lines = 0;
  MT_OK(metrale_log_set_level(METRALE_LOG_DEBUG));
  MT_OK(metrale_log_set_callback(count_trim_lines, NULL));
  mt_close(ctx); /* c was never freed: the sweep frees it as before */
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_log_set_level(METRALE_LOG_INFO));
  assert_int_equal(trim_lines, 1);
  assert_int_equal(ctx_pinned(obs, a, MIB), 0);
  assert_int_equal(ctx_pinned(obs, b, 4096), 0);
  assert_int_equal(ctx_pinned(obs, c, 4096), 0);
  mt_close(obs);
}

static void bad_sizes_do_not_touch_the_cache(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  void* h = NULL;
  MT_STATUS(metrale_host_alloc_pinned(ctx, 0, &h), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &h));
  MT_OK(metrale_host_free_pinned(ctx, h));
  void* huge = NULL;
  MT_STATUS(metrale_host_alloc_pinned(ctx, SIZE_MAX / 2, &huge), METRALE_ERROR_OUT_OF_MEMORY);
  MT_STATUS(metrale_host_alloc_pinned(ctx, SIZE_MAX, &huge), METRALE_ERROR_OUT_OF_MEMORY);
  assert_null(huge);
  void* again = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, MIB, &again));
  assert_ptr_equal(again, h);
  MT_OK(metrale_host_free_pinned(ctx, again));
  mt_close(ctx);
}

/* A reused block is a pinned source again (h2d_async waits for it), and a
 * stale pointer to a cached block is copied as pageable memory. */
static void copies_through_reused_and_stale_blocks(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  const size_t n = 64 * 1024;
  metrale_devptr_t dev = 0;
  MT_OK(metrale_alloc(ctx, n, &dev));
  uint8_t* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, n, (void**)&h));
  MT_OK(metrale_host_free_pinned(ctx, h));
  uint8_t* r = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, n, (void**)&r));
  assert_ptr_equal(r, h);
  for (size_t i = 0; i < n; ++i) r[i] = (uint8_t)(i * 7);
  uint64_t waits = mt_counters(ctx).pinned_source_waits;
  MT_OK(metrale_copy_h2d_async(ctx, r, n, dev, NULL));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, waits + 1);
  memset(r, 0, n);
  MT_OK(metrale_copy_d2h(ctx, dev, r, n));
  for (size_t i = 0; i < n; ++i) assert_int_equal(r[i], (uint8_t)(i * 7));
  MT_OK(metrale_host_free_pinned(ctx, r));
  /* Stale: still page-locked by the pool, pageable to this context. */
  for (size_t i = 0; i < n; ++i) h[i] = (uint8_t)(i * 3);
  MT_OK(metrale_copy_h2d_async(ctx, h, n, dev, NULL));
  assert_int_equal(mt_counters(ctx).pinned_source_waits, waits + 1);
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  uint8_t* back = mt_read_device(ctx, dev, n);
  for (size_t i = 0; i < n; ++i) assert_int_equal(back[i], (uint8_t)(i * 3));
  free(back);
  MT_OK(metrale_free(ctx, dev));
  mt_close(ctx);
}

/* With checked pointers the block's device address leaves the bounds index
 * at free and comes back at reuse. */
static void checked_pointers_follow_the_block(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.pinned_pool = 1;
  o.checked_pointers = 1;
  metrale_context_t* ctx = mt_open(&o);
  const size_t n = 4096;
  uint8_t* h = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, n, (void**)&h));
  metrale_devptr_t d = 0;
  MT_OK(metrale_host_device_pointer(ctx, h, &d));
  uint8_t out[64];
  memset(h, 0x5A, n);
  MT_OK(metrale_copy_d2h(ctx, d, out, sizeof out));
  assert_int_equal(out[63], 0x5A);
  MT_OK(metrale_host_free_pinned(ctx, h));
  MT_STATUS(metrale_copy_d2h(ctx, d, out, sizeof out), METRALE_ERROR_OUT_OF_BOUNDS);
  uint8_t* again = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, n, (void**)&again));
  assert_ptr_equal(again, h);
  memset(again, 0x6B, n);
  MT_OK(metrale_copy_d2h(ctx, d, out, sizeof out));
  assert_int_equal(out[0], 0x6B);
  MT_OK(metrale_host_free_pinned(ctx, again));
  mt_close(ctx);
}

/* --- 8 threads allocating and freeing recurring sizes at once ------------ */

enum { THREADS = 8, ROUNDS = 400 };

typedef struct {
  metrale_context_t* ctx;
  unsigned seed;
  int failures;
} worker_t;

static void* churn(void* arg) {
  worker_t* w = arg;
  static const size_t sizes[] = {4096, 10000, 65536, 1 << 20};
  void* held[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < ROUNDS; ++i) {
    unsigned k = (w->seed = w->seed * 1103515245u + 12345u) >> 16;
    size_t slot = k % 4;
    if (held[slot] != NULL) {
      if (metrale_host_free_pinned(w->ctx, held[slot]) != METRALE_OK) ++w->failures;
      held[slot] = NULL;
      continue;
    }
    void* p = NULL;
    if (metrale_host_alloc_pinned(w->ctx, sizes[slot], &p) != METRALE_OK) {
      ++w->failures;
      continue;
    }
    /* Ours alone: a block handed to two threads would show here. */
    memset(p, (int)(w->seed & 0xFF), sizes[slot]);
    int yes = 0;
    if (metrale_host_is_pinned(w->ctx, p, sizes[slot], &yes) != METRALE_OK || yes != 1) ++w->failures;
    const uint8_t* b = p;
    if (b[0] != (uint8_t)(w->seed & 0xFF) || b[sizes[slot] - 1] != (uint8_t)(w->seed & 0xFF))
      ++w->failures;
    held[slot] = p;
  }
  for (int s = 0; s < 4; ++s) {
    if (held[s] != NULL && metrale_host_free_pinned(w->ctx, held[s]) != METRALE_OK) ++w->failures;
  }
  return NULL;
}

static void eight_threads_alloc_and_free(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(1);
  pthread_t t[THREADS];
  worker_t w[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    w[i] = (worker_t){ctx, 7919u * (unsigned)(i + 1), 0};
    assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
  }
  for (int i = 0; i < THREADS; ++i) assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < THREADS; ++i) assert_int_equal(w[i].failures, 0);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(reuse_returns_the_same_block_per_class),
      cmocka_unit_test(freed_block_answers_as_before),
      cmocka_unit_test(class_slack_is_not_pinned),
      cmocka_unit_test(hit_makes_no_backend_call),
      cmocka_unit_test(pool_off_by_option),
      cmocka_unit_test(pool_off_by_env),
      cmocka_unit_test(budget_overflow_frees_oldest),
      cmocka_unit_test(oom_gives_the_cache_back_and_retries),
      cmocka_unit_test(destroy_frees_cached_blocks),
      cmocka_unit_test(bad_sizes_do_not_touch_the_cache),
      cmocka_unit_test(copies_through_reused_and_stale_blocks),
      cmocka_unit_test(checked_pointers_follow_the_block),
      cmocka_unit_test(eight_threads_alloc_and_free),
  };
  return MT_RUN(tests);
}
