/* Stress: 16 threads, each on its own stream, each doing METRALE_STRESS_OPS
 * (default 100000) mixed operations: alloc, free, h2d, d2h, d2d, memset and a
 * fill_u32 launch (the test kernel: a C one on the host backend, the fatbin
 * on cuda), and stream syncs. Each thread keeps its own copy of what every
 * buffer it holds should contain and checks every read against it. When all
 * threads are done (and still hold their buffers) the ledger must equal the
 * sum of their accounts; after each frees what it holds it must be empty, and
 * the alloc/free counters must equal the number of calls made.
 *
 * Work is ordered on the thread's own stream only (async copies, memsets,
 * launches, d2h_on_stream), and the stream is synchronized before a free, so
 * the test is correct on a GPU as well. Worker threads never call cmocka's
 * assertions (they longjmp): they record the first failure, and the main
 * thread fails the case with it. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_support.h"

#define THREADS 16
#define HELD_MAX 8
#define BUF_MAX 4096 /* bytes, a multiple of 4 for fill_u32 */

typedef struct {
  metrale_devptr_t ptr;
  size_t bytes;
  unsigned char* want; /* what the device buffer holds */
} held_t;

typedef struct {
  metrale_context_t* ctx;
  pthread_barrier_t* done;    /* all threads finished their ops */
  pthread_barrier_t* checked; /* main thread compared the ledger */
  int index;
  long ops;
  uint64_t rng;
  metrale_stream_t* stream;
  held_t held[HELD_MAX];
  int nheld;
  size_t live_bytes_at_barrier;
  int live_count_at_barrier;
  uint64_t allocs, alloc_bytes, frees, free_bytes;
  char failure[512];
  unsigned char host[BUF_MAX], back[BUF_MAX];
} worker_t;

static uint64_t next_rand(worker_t* w) {
  w->rng ^= w->rng << 13;
  w->rng ^= w->rng >> 7;
  w->rng ^= w->rng << 17;
  return w->rng;
}

/* Records the first failure; returns 0 so callers can return it. */
static int record_failure(worker_t* w, const char* what, metrale_status_t s) {
  if (w->failure[0] == '\0') {
    snprintf(w->failure, sizeof w->failure, "thread %d: %s: %s (%s)", w->index, what,
             metrale_status_name(s), metrale_last_error_message());
  }
  return 0;
}

#define CALL(w, expr)                                   \
  do {                                                  \
    metrale_status_t s_ = (expr);                       \
    if (s_ != METRALE_OK) return record_failure((w), #expr, s_);  \
  } while (0)

static int do_alloc(worker_t* w) {
  if (w->nheld == HELD_MAX) return 1;
  size_t bytes = 4 * (1 + (size_t)(next_rand(w) % (BUF_MAX / 4)));
  held_t* h = &w->held[w->nheld];
  CALL(w, metrale_alloc(w->ctx, bytes, &h->ptr));
  h->bytes = bytes;
  h->want = calloc(1, bytes);
  if (h->want == NULL) return record_failure(w, "calloc", METRALE_ERROR_OUT_OF_MEMORY);
  /* Start from a known state: zeroed on the thread's stream. */
  CALL(w, metrale_memset_async(w->ctx, h->ptr, 0, bytes, w->stream));
  w->nheld++;
  w->allocs++;
  w->alloc_bytes += bytes;
  return 1;
}

static int do_free(worker_t* w, int i) {
  held_t* h = &w->held[i];
  /* A GPU free must not race the stream's pending work on the buffer. */
  CALL(w, metrale_stream_synchronize(w->ctx, w->stream));
  CALL(w, metrale_free(w->ctx, h->ptr));
  w->frees++;
  w->free_bytes += h->bytes;
  free(h->want);
  w->held[i] = w->held[--w->nheld];
  return 1;
}

static int verify(worker_t* w, held_t* h) {
  CALL(w, metrale_copy_d2h_on_stream(w->ctx, h->ptr, w->back, h->bytes, w->stream));
  if (memcmp(w->back, h->want, h->bytes) != 0) {
    return record_failure(w, "device bytes differ from what this thread wrote", METRALE_OK);
  }
  return 1;
}

static int one_op(worker_t* w) {
  unsigned op = (unsigned)(next_rand(w) % 16);
  if (op < 2 || w->nheld == 0) return do_alloc(w);
  held_t* h = &w->held[next_rand(w) % (uint64_t)w->nheld];
  size_t off = 4 * (size_t)(next_rand(w) % (h->bytes / 4));
  size_t len = 4 * (1 + (size_t)(next_rand(w) % ((h->bytes - off) / 4)));
  switch (op) {
    case 2:
    case 3:
      return do_free(w, (int)(h - w->held));
    case 4:
    case 5: { /* h2d of a fresh pattern */
      unsigned char seed = (unsigned char)next_rand(w);
      for (size_t i = 0; i < len; ++i) w->host[i] = (unsigned char)(seed + i * 13);
      CALL(w, metrale_copy_h2d_async(w->ctx, w->host, len, h->ptr + off, w->stream));
      memcpy(h->want + off, w->host, len);
      return 1;
    }
    case 6:
    case 7:
      return verify(w, h);
    case 8: { /* d2d between two held buffers (or within one) */
      held_t* d = &w->held[next_rand(w) % (uint64_t)w->nheld];
      size_t n = len < d->bytes ? len : d->bytes;
      size_t doff = 4 * (size_t)(next_rand(w) % ((d->bytes - n) / 4 + 1));
      if (d == h && (doff < off + n && off < doff + n)) doff = off; /* no overlap */
      CALL(w, metrale_copy_d2d_async(w->ctx, h->ptr + off, d->ptr + doff, n, w->stream));
      memmove(d->want + doff, h->want + off, n);
      return 1;
    }
    case 9:
    case 10: {
      unsigned char v = (unsigned char)next_rand(w);
      CALL(w, metrale_memset_async(w->ctx, h->ptr + off, v, len, w->stream));
      memset(h->want + off, v, len);
      return 1;
    }
    case 11:
    case 12: {
      uint32_t v = (uint32_t)next_rand(w);
      CALL(w, mt_fill_u32(w->ctx, w->stream, h->ptr + off, v, len / 4));
      for (size_t i = 0; i < len / 4; ++i) memcpy(h->want + off + 4 * i, &v, 4);
      return 1;
    }
    case 13:
      CALL(w, metrale_stream_synchronize(w->ctx, w->stream));
      return 1;
    default:
      return verify(w, h);
  }
}

static void* worker_main(void* arg) {
  worker_t* w = arg;
  metrale_status_t s = metrale_stream_create(w->ctx, &w->stream);
  if (s != METRALE_OK) record_failure(w, "stream_create", s);
  for (long i = 0; i < w->ops && w->failure[0] == '\0'; ++i) one_op(w);
  for (int i = 0; i < w->nheld && w->failure[0] == '\0'; ++i) verify(w, &w->held[i]);
  if (w->stream) metrale_stream_synchronize(w->ctx, w->stream);
  w->live_count_at_barrier = w->nheld;
  w->live_bytes_at_barrier = 0;
  for (int i = 0; i < w->nheld; ++i) w->live_bytes_at_barrier += w->held[i].bytes;
  pthread_barrier_wait(w->done);
  pthread_barrier_wait(w->checked);
  while (w->nheld > 0) {
    if (!do_free(w, w->nheld - 1)) {
      free(w->held[w->nheld - 1].want);
      w->nheld--;
    }
  }
  if (w->stream) {
    s = metrale_stream_destroy(w->ctx, w->stream);
    if (s != METRALE_OK) record_failure(w, "stream_destroy", s);
  }
  return NULL;
}

static long stress_ops(void) {
  const char* v = getenv("METRALE_STRESS_OPS");
  if (v == NULL || v[0] == '\0') return 100000;
  char* end = NULL;
  long n = strtol(v, &end, 10);
  if (*end != '\0' || n < 0) fail_msg("METRALE_STRESS_OPS=%s is not a count", v);
  return n;
}

static void sixteen_threads_keep_the_ledger_exact(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_counters_t before = mt_counters(ctx);
  long ops = stress_ops();
  print_message("[ stress   ] %d threads x %ld operations\n", THREADS, ops);

  static worker_t workers[THREADS];
  pthread_t threads[THREADS];
  pthread_barrier_t done, checked;
  pthread_barrier_init(&done, NULL, THREADS + 1);
  pthread_barrier_init(&checked, NULL, THREADS + 1);
  for (int i = 0; i < THREADS; ++i) {
    memset(&workers[i], 0, sizeof workers[i]);
    workers[i].ctx = ctx;
    workers[i].done = &done;
    workers[i].checked = &checked;
    workers[i].index = i;
    workers[i].ops = ops;
    workers[i].rng = 0x9E3779B97F4A7C15ull * (uint64_t)(i + 1);
    assert_int_equal(pthread_create(&threads[i], NULL, worker_main, &workers[i]), 0);
  }

  pthread_barrier_wait(&done);
  size_t want_count = 0, want_bytes = 0;
  for (int i = 0; i < THREADS; ++i) {
    want_count += (size_t)workers[i].live_count_at_barrier;
    want_bytes += workers[i].live_bytes_at_barrier;
  }
  mt_ledger_t mid = mt_ledger(ctx);
  pthread_barrier_wait(&checked);
  for (int i = 0; i < THREADS; ++i) pthread_join(threads[i], NULL);
  pthread_barrier_destroy(&done);
  pthread_barrier_destroy(&checked);

  for (int i = 0; i < THREADS; ++i) {
    if (workers[i].failure[0] != '\0') fail_msg("%s", workers[i].failure);
  }
  assert_int_equal(mid.count, want_count);
  assert_int_equal(mid.bytes, want_bytes);
  mt_ledger_t end = mt_ledger(ctx);
  assert_int_equal(end.count, 0);
  assert_int_equal(end.bytes, 0);

  uint64_t allocs = 0, alloc_bytes = 0, frees = 0, free_bytes = 0;
  for (int i = 0; i < THREADS; ++i) {
    allocs += workers[i].allocs;
    alloc_bytes += workers[i].alloc_bytes;
    frees += workers[i].frees;
    free_bytes += workers[i].free_bytes;
  }
  metrale_counters_t after = mt_counters(ctx);
  assert_int_equal(after.allocs - before.allocs, allocs);
  assert_int_equal(after.alloc_bytes - before.alloc_bytes, alloc_bytes);
  assert_int_equal(after.frees - before.frees, frees);
  assert_int_equal(after.free_bytes - before.free_bytes, free_bytes);
  assert_int_equal(allocs, frees);
  print_message("[ stress   ] %llu allocations, %llu bytes\n", (unsigned long long)allocs,
                (unsigned long long)alloc_bytes);
  MT_OK(metrale_context_fault(ctx));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(sixteen_threads_keep_the_ledger_exact),
  };
  return MT_RUN(tests);
}
