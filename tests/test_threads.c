/* Eight threads allocating and freeing at once: the ledger must come out
 * exact, with every kept allocation accounted for. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

#define THREADS 8
#define ROUNDS 200

typedef struct {
  metrale_context_t* ctx;
  int id;
  size_t kept_count, kept_bytes, allocs, frees;
  metrale_devptr_t kept[ROUNDS];
  size_t kept_size[ROUNDS];
  int failures;
} worker_t;

static void* work(void* arg) {
  worker_t* w = arg;
  unsigned seed = 1234u + (unsigned)w->id;
  metrale_devptr_t held[16];
  size_t held_size[16];
  int nheld = 0;
  for (int r = 0; r < ROUNDS; ++r) {
    size_t bytes = 1 + (size_t)(rand_r(&seed) % 4096);
    metrale_devptr_t p = 0;
    if (metrale_alloc_at(w->ctx, bytes, "thread_site.c", w->id, &p) != METRALE_OK) {
      w->failures++;
      continue;
    }
    w->allocs++;
    int action = rand_r(&seed) % 3;
    if (action == 0) {
      if (metrale_free(w->ctx, p) != METRALE_OK) w->failures++;
      w->frees++;
    } else if (action == 1 && nheld < 16) {
      held[nheld] = p;
      held_size[nheld++] = bytes;
    } else {
      w->kept[w->kept_count] = p;
      w->kept_size[w->kept_count++] = bytes;
      w->kept_bytes += bytes;
    }
    /* Now and then drop the oldest held one, and touch memory. */
    if (nheld > 0 && rand_r(&seed) % 4 == 0) {
      if (metrale_memset(w->ctx, held[0], (uint8_t)w->id, held_size[0]) != METRALE_OK)
        w->failures++;
      if (metrale_free(w->ctx, held[0]) != METRALE_OK) w->failures++;
      w->frees++;
      memmove(held, held + 1, (size_t)(nheld - 1) * sizeof held[0]);
      memmove(held_size, held_size + 1, (size_t)(nheld - 1) * sizeof held_size[0]);
      --nheld;
    }
  }
  for (int i = 0; i < nheld; ++i) {
    if (metrale_free(w->ctx, held[i]) != METRALE_OK) w->failures++;
    w->frees++;
  }
  return NULL;
}

static void eight_threads_keep_ledger_exact(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_counters_reset(ctx));
  static worker_t w[THREADS];
  memset(w, 0, sizeof w);
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; ++i) {
    w[i].ctx = ctx;
    w[i].id = i + 1;
    assert_int_equal(pthread_create(&t[i], NULL, work, &w[i]), 0);
  }
  size_t kept_count = 0, kept_bytes = 0, allocs = 0, frees = 0;
  int failures = 0;
  for (int i = 0; i < THREADS; ++i) {
    assert_int_equal(pthread_join(t[i], NULL), 0);
    kept_count += w[i].kept_count;
    kept_bytes += w[i].kept_bytes;
    allocs += w[i].allocs;
    frees += w[i].frees;
    failures += w[i].failures;
  }
  assert_int_equal(failures, 0);
  mt_ledger_t l = mt_ledger(ctx);
  assert_int_equal(l.count, kept_count);
  assert_int_equal(l.bytes, kept_bytes);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.allocs, allocs);
  assert_int_equal(c.frees, frees);

  /* Every kept pointer is on the ledger under its thread's site. */
  metrale_allocation_t* all = calloc(kept_count + 1, sizeof *all);
  assert_non_null(all);
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, all, kept_count + 1, &n));
  assert_int_equal(n, kept_count);
  for (int i = 0; i < THREADS; ++i) {
    for (size_t k = 0; k < w[i].kept_count; ++k) {
      int found = 0;
      for (size_t j = 0; j < n && !found; ++j)
        found = all[j].ptr == w[i].kept[k] && all[j].bytes == w[i].kept_size[k] &&
                all[j].line == w[i].id;
      assert_true(found);
    }
  }
  /* Sequence numbers are unique and increase oldest first. */
  for (size_t j = 1; j < n; ++j) assert_true(all[j].seq > all[j - 1].seq);
  free(all);

  for (int i = 0; i < THREADS; ++i)
    for (size_t k = 0; k < w[i].kept_count; ++k) MT_OK(metrale_free(ctx, w[i].kept[k]));
  l = mt_ledger(ctx);
  assert_int_equal(l.count, 0);
  assert_int_equal(l.bytes, 0);
  mt_close(ctx);
}

typedef struct {
  metrale_context_t* ctx;
  metrale_devptr_t p;
  int ok;
  int not_found;
} racer_t;

static void* free_racer(void* arg) {
  racer_t* r = arg;
  metrale_status_t s = metrale_free(r->ctx, r->p);
  r->ok = s == METRALE_OK;
  r->not_found = s == METRALE_ERROR_NOT_FOUND;
  return NULL;
}

static void racing_double_free_frees_once(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  for (int round = 0; round < 50; ++round) {
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc(ctx, 256, &p));
    racer_t r[4];
    pthread_t t[4];
    for (int i = 0; i < 4; ++i) {
      r[i] = (racer_t){ctx, p, 0, 0};
      assert_int_equal(pthread_create(&t[i], NULL, free_racer, &r[i]), 0);
    }
    int oks = 0, nf = 0;
    for (int i = 0; i < 4; ++i) {
      assert_int_equal(pthread_join(t[i], NULL), 0);
      oks += r[i].ok;
      nf += r[i].not_found;
    }
    assert_int_equal(oks, 1);
    assert_int_equal(nf, 3);
  }
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

/* The launch counter adds without a locked instruction, each thread on a
 * line of its own: it must still count every launch, with more threads at
 * once than there are lines (the rest share one) and with threads that
 * take over the lines of threads gone. */
enum { LAUNCHERS = 80, LAUNCHES = 3000 };
static pthread_barrier_t g_start; /* all of a wave launch at once */

typedef struct {
  metrale_context_t* ctx;
  metrale_kernel_t* kernel;
  metrale_devptr_t p;
  metrale_stream_t* stream; /* its own: launches on one stream take turns */
  int failures;
} launcher_t;

static void* launch_many(void* arg) {
  launcher_t* l = arg;
  uint64_t n = 1;
  uint32_t value = 7;
  void* params[] = {&l->p, &value, &n};
  metrale_dim3_t one = {1, 1, 1};
  pthread_barrier_wait(&g_start);
  for (int i = 0; i < LAUNCHES; ++i) {
    if (metrale_launch(l->ctx, l->kernel, one, one, 0, l->stream, params) != METRALE_OK) {
      ++l->failures;
    }
  }
  return NULL;
}

static void launch_waves(launcher_t* l, int threads) {
  pthread_t t[LAUNCHERS];
  assert_int_equal(pthread_barrier_init(&g_start, NULL, (unsigned)threads), 0);
  for (int i = 0; i < threads; ++i) {
    assert_int_equal(pthread_create(&t[i], NULL, launch_many, &l[i]), 0);
  }
  for (int i = 0; i < threads; ++i) assert_int_equal(pthread_join(t[i], NULL), 0);
  for (int i = 0; i < threads; ++i) assert_int_equal(l[i].failures, 0);
  assert_int_equal(pthread_barrier_destroy(&g_start), 0);
}

static void launch_count_is_exact_across_threads(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  launcher_t l[LAUNCHERS];
  for (int i = 0; i < LAUNCHERS; ++i) {
    l[i] = (launcher_t){ctx, mt_kernel(ctx, "fill_u32"), 0, NULL, 0};
    MT_OK(metrale_alloc(ctx, sizeof(uint32_t), &l[i].p)); /* one per thread: no shared writes */
    MT_OK(metrale_stream_create(ctx, &l[i].stream));
  }
  const uint64_t before = mt_counters(ctx).launches;
  launch_waves(l, LAUNCHERS);
  launch_waves(l, LAUNCHERS / 2); /* on lines the first wave left */
  assert_int_equal(mt_counters(ctx).launches - before, (LAUNCHERS + LAUNCHERS / 2) * LAUNCHES);
  MT_OK(metrale_counters_reset(ctx));
  assert_int_equal(mt_counters(ctx).launches, 0);
  launch_waves(l, 3);
  assert_int_equal(mt_counters(ctx).launches, 3 * LAUNCHES);
  for (int i = 0; i < LAUNCHERS; ++i) {
    MT_OK(metrale_stream_synchronize(ctx, l[i].stream));
    MT_OK(metrale_stream_destroy(ctx, l[i].stream));
    MT_OK(metrale_free(ctx, l[i].p));
  }
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(eight_threads_keep_ledger_exact),
      cmocka_unit_test(racing_double_free_frees_once),
      cmocka_unit_test(launch_count_is_exact_across_threads),
  };
  return MT_RUN(tests);
}
