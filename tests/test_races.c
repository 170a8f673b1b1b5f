/* Rule 4 of the header, concurrency with free: a red-zone scan racing
 * frees on other threads stays exact (no INVALID_ARGUMENT, no blame on a
 * block that reused a freed address, a real overflow still found), a sweep
 * racing frees keeps the counters balanced, a stream destroyed while
 * red-zone passes run loses no block and leaves no dead stream in the pool,
 * and kernel timing stays bounded over long runs without a read. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <unistd.h>

#include "test_support.h"

#define PAD 64
#define WORKERS 4

static metrale_context_t* open_with_pad(size_t pad) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = pad;
  return mt_open(&o);
}

/* ------------------------------------------------------------------ */
/* Red-zone scan racing alloc and free                                 */
/* ------------------------------------------------------------------ */

typedef struct {
  metrale_context_t* ctx;
  unsigned seed;
  int rounds;
  atomic_int* stop;
  int failures;
  metrale_devptr_t freed[1024]; /* the latest frees, a ring */
  int nfreed;
} churn_t;

/* Allocates blocks of varied sizes (so a freed address comes back with
 * another size), fills each whole block, never a byte past it, with a value
 * that is not the pattern, and frees them in a shuffled order. */
static void* churn(void* arg) {
  churn_t* w = arg;
  metrale_devptr_t held[8] = {0};
  for (int r = 0; r < w->rounds && !atomic_load(w->stop); ++r) {
    int slot = rand_r(&w->seed) % 8;
    if (held[slot] != 0) {
      if (metrale_free(w->ctx, held[slot]) != METRALE_OK) w->failures++;
      w->freed[w->nfreed++ % 1024] = held[slot];
      held[slot] = 0;
    }
    size_t bytes = 16 + (size_t)(rand_r(&w->seed) % 512);
    metrale_devptr_t p = 0;
    if (metrale_alloc(w->ctx, bytes, &p) != METRALE_OK) {
      w->failures++;
      continue;
    }
    if (metrale_memset(w->ctx, p, 0x00, bytes) != METRALE_OK) w->failures++;
    held[slot] = p;
  }
  for (int i = 0; i < 8; ++i) {
    if (held[i] == 0) continue;
    if (metrale_free(w->ctx, held[i]) != METRALE_OK) w->failures++;
    w->freed[w->nfreed++ % 1024] = held[i];
  }
  return NULL;
}

/* Long-lived padded blocks: they make each scan's pass long enough that
 * frees land inside it. */
#define BALLAST 10000
static metrale_devptr_t* add_ballast(metrale_context_t* ctx) {
  metrale_devptr_t* b = calloc(BALLAST, sizeof *b);
  assert_non_null(b);
  for (int i = 0; i < BALLAST; ++i) MT_OK(metrale_alloc(ctx, 16, &b[i]));
  return b;
}

static void drop_ballast(metrale_context_t* ctx, metrale_devptr_t* b) {
  for (int i = 0; i < BALLAST; ++i) MT_OK(metrale_free(ctx, b[i]));
  free(b);
}

static void start_churn(metrale_context_t* ctx, churn_t* w, pthread_t* t, atomic_int* stop,
                        int rounds) {
  for (int i = 0; i < WORKERS; ++i) {
    memset(&w[i], 0, sizeof w[i]);
    w[i].ctx = ctx;
    w[i].seed = 77u + (unsigned)i;
    w[i].rounds = rounds;
    w[i].stop = stop;
    assert_int_equal(pthread_create(&t[i], NULL, churn, &w[i]), 0);
  }
}

static int join_churn(churn_t* w, pthread_t* t) {
  int failures = 0;
  for (int i = 0; i < WORKERS; ++i) {
    assert_int_equal(pthread_join(t[i], NULL), 0);
    failures += w[i].failures;
  }
  return failures;
}

/* Once no pass is open, every block a pass held back is back with the
 * backend: the host backend then refuses a memset there (no block allocated
 * after the churn started can have taken it: none is left live). */
static void held_frees_were_released(metrale_context_t* ctx, churn_t* w) {
  if (mt_pool_on(ctx)) {
    /* Pooled blocks go back to the pool: every block it still counts as
     * handed out is a live ledger allocation or a freed padded block
     * waiting for its red-zone check, none is still held by a pass. */
    metrale_pool_stats_t st = {.struct_size = sizeof st};
    size_t live = 0;
    MT_OK(metrale_pool_stats(ctx, &st));
    MT_OK(metrale_live_count(ctx, &live));
    assert_int_equal(st.blocks_in_use, live + st.pads_pending);
    return;
  }
  if (!mt_is_host(ctx)) return; /* a GPU would fault on a freed address */
  int still_there = 0;
  for (int i = 0; i < WORKERS; ++i) {
    int n = w[i].nfreed < 1024 ? w[i].nfreed : 1024;
    for (int k = 0; k < n; ++k)
      if (metrale_memset(ctx, w[i].freed[k], 0, 1) == METRALE_OK) still_there++;
  }
  assert_int_equal(still_there, 0);
}

static void scan_racing_frees_reports_only_the_real_overflow(void** state) {
  (void)state;
  metrale_context_t* ctx = open_with_pad(PAD);
  mt_load_kernels(ctx);
  /* The one real overflow: 3 bytes past a long-lived block. */
  const size_t bytes = 100;
  metrale_devptr_t victim = 0;
  MT_OK(metrale_alloc(ctx, bytes, &victim));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  MT_OK(mt_overflow_write(ctx, victim, bytes, 3, 0x5A));
  metrale_devptr_t* ballast = add_ballast(ctx);

  atomic_int stop = 0;
  churn_t w[WORKERS];
  pthread_t t[WORKERS];
  start_churn(ctx, w, t, &stop, 1000000);
  int scans = 0, other_status = 0, wrong_blame = 0, missed = 0;
  metrale_redzone_violation_t v[8];
  for (scans = 0; scans < 100; ++scans) {
    size_t count = 0;
    metrale_status_t s = metrale_redzone_scan(ctx, v, 8, &count);
    if (s != METRALE_ERROR_REDZONE_CORRUPTED) {
      if (other_status++ == 0)
        print_error("scan %d: %s: %s\n", scans, metrale_status_name(s),
                    metrale_last_error_message());
      continue;
    }
    if (count != 1 || v[0].ptr != victim) {
      if (wrong_blame++ == 0)
        print_error("scan %d: %zu violations, the first at 0x%llx (seq %llu)\n", scans, count,
                    (unsigned long long)v[0].ptr, (unsigned long long)v[0].seq);
      continue;
    }
    if (v[0].seq != a.seq || v[0].bytes != bytes || v[0].first_bad_offset != 0 ||
        v[0].bad_bytes != 3 || v[0].found != 0x5A)
      missed++;
  }
  atomic_store(&stop, 1);
  assert_int_equal(join_churn(w, t), 0);
  assert_int_equal(other_status, 0);
  assert_int_equal(wrong_blame, 0);
  assert_int_equal(missed, 0);
  held_frees_were_released(ctx, w);
  drop_ballast(ctx, ballast);
  assert_int_equal(mt_ledger(ctx).count, 1);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  size_t count = 9;
  MT_OK(metrale_redzone_scan(ctx, v, 8, &count));
  assert_int_equal(count, 0);
  MT_OK(metrale_free(ctx, victim));
  mt_close(ctx);
}

typedef struct {
  metrale_context_t* ctx;
  atomic_int* stop;
  uint64_t from_seq;
  int bad;
} poisoner_t;

/* Poison passes overlapping the scans: a pass that ends must not give back
 * a block another pass, opened before the free, may still read. */
static void* poison_loop(void* arg) {
  poisoner_t* p = arg;
  while (!atomic_load(p->stop)) {
    metrale_status_t s = metrale_redzone_poison(p->ctx, p->from_seq, UINT64_MAX);
    if (s != METRALE_OK && p->bad++ == 0)
      print_error("poison: %s: %s\n", metrale_status_name(s), metrale_last_error_message());
  }
  return NULL;
}

/* With nobody writing past a block, scans racing frees (and poison passes
 * on another thread) are always clean, and poison never writes a block
 * that reused a freed address. */
static void scan_and_poison_racing_frees_stay_clean(void** state) {
  (void)state;
  metrale_context_t* ctx = open_with_pad(PAD);
  metrale_devptr_t* ballast = add_ballast(ctx);
  atomic_int stop = 0;
  churn_t w[WORKERS];
  pthread_t t[WORKERS], pt;
  start_churn(ctx, w, t, &stop, 1000000);
  /* Short passes, on the churning blocks only (seqs past the ballast). */
  poisoner_t p = {ctx, &stop, BALLAST, 0};
  assert_int_equal(pthread_create(&pt, NULL, poison_loop, &p), 0);
  int bad = 0;
  for (int i = 0; i < 100; ++i) {
    size_t count = 0;
    metrale_status_t s = metrale_redzone_scan(ctx, NULL, 0, &count);
    if (s != METRALE_OK && bad++ == 0)
      print_error("scan %d: %s: %s\n", i, metrale_status_name(s), metrale_last_error_message());
  }
  atomic_store(&stop, 1);
  assert_int_equal(pthread_join(pt, NULL), 0);
  assert_int_equal(join_churn(w, t), 0);
  assert_int_equal(bad, 0);
  assert_int_equal(p.bad, 0);
  held_frees_were_released(ctx, w);
  drop_ballast(ctx, ballast);
  mt_ledger_t l = mt_ledger(ctx);
  assert_int_equal(l.count, 0);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.allocs, c.frees);
  assert_int_equal(c.alloc_bytes, c.free_bytes);
  mt_close(ctx);
}

/* ------------------------------------------------------------------ */
/* Sweep racing alloc and free                                         */
/* ------------------------------------------------------------------ */

typedef struct {
  metrale_context_t* ctx;
  unsigned seed;
  int failures;
} sweep_worker_t;

/* Keeps up to 32 blocks of random sizes and replaces a random one each
 * round, so that freed addresses come back with other sizes while a sweep
 * walks its snapshot. A block the sweep freed leaves a stale pointer here,
 * so a free may answer NOT_FOUND, INVALID_ARGUMENT (now inside another
 * block), or free a block that took the address: in every case exactly one
 * free counts each block. Anything else is a failure. */
#define KEEP 32
static int free_answer_ok(metrale_status_t s) {
  return s == METRALE_OK || s == METRALE_ERROR_NOT_FOUND || s == METRALE_ERROR_INVALID_ARGUMENT;
}

static void* alloc_free_loop(void* arg) {
  sweep_worker_t* w = arg;
  metrale_devptr_t held[KEEP] = {0};
  for (int r = 0; r < 3000; ++r) {
    int slot = rand_r(&w->seed) % KEEP;
    if (held[slot] != 0) {
      metrale_status_t s = metrale_free(w->ctx, held[slot]);
      if (!free_answer_ok(s)) w->failures++;
      held[slot] = 0;
    }
    size_t bytes = 1 + (size_t)(rand_r(&w->seed) % 1024);
    if (metrale_alloc(w->ctx, bytes, &held[slot]) != METRALE_OK) w->failures++;
  }
  for (int i = 0; i < KEEP; ++i) {
    if (held[i] == 0) continue;
    if (!free_answer_ok(metrale_free(w->ctx, held[i]))) w->failures++;
  }
  return NULL;
}

static void sweep_racing_frees(size_t pad, int scan_too) {
  metrale_context_t* ctx = open_with_pad(pad);
  MT_OK(metrale_counters_reset(ctx));
  sweep_worker_t w[WORKERS];
  pthread_t t[WORKERS];
  for (int i = 0; i < WORKERS; ++i) {
    w[i] = (sweep_worker_t){ctx, 991u * (unsigned)(i + 1), 0};
    assert_int_equal(pthread_create(&t[i], NULL, alloc_free_loop, &w[i]), 0);
  }
  int bad = 0;
  for (int i = 0; i < 300; ++i) {
    size_t swept = 0, count = 0;
    if (metrale_sweep_unreleased(ctx, &swept) != METRALE_OK) bad++;
    if (scan_too && metrale_redzone_scan(ctx, NULL, 0, &count) != METRALE_OK) bad++;
  }
  for (int i = 0; i < WORKERS; ++i) {
    assert_int_equal(pthread_join(t[i], NULL), 0);
    assert_int_equal(w[i].failures, 0);
  }
  assert_int_equal(bad, 0);
  MT_OK(metrale_sweep_unreleased(ctx, NULL));
  assert_int_equal(mt_ledger(ctx).count, 0);
  assert_int_equal(mt_ledger(ctx).bytes, 0);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.allocs, (uint64_t)WORKERS * 3000);
  assert_int_equal(c.frees, c.allocs);
  assert_int_equal(c.free_bytes, c.alloc_bytes);
  mt_close(ctx);
}

static void sweep_racing_frees_keeps_counters_exact(void** state) {
  (void)state;
  metrale_log_set_level(METRALE_LOG_ERROR); /* the sweep warns per site */
  sweep_racing_frees(0, 0);
  sweep_racing_frees(PAD, 1);
  metrale_log_set_level(METRALE_LOG_INFO);
}

/* ------------------------------------------------------------------ */
/* Streams destroyed while red-zone passes run                          */
/* ------------------------------------------------------------------ */

/* A pass (here from trims and scans on other threads) takes freed padded
 * blocks off the check list and frees them on the streams they were freed
 * on; a stream destroyed meanwhile must not be retired under it. Once it
 * was: blocks stayed handed out for good (blocks_in_use > 0 with nothing
 * live) and the pool kept the dead stream, so later trims and allocations
 * on new streams failed with INVALID_ARGUMENT. */
typedef struct {
  metrale_context_t* ctx;
  atomic_int* done;
  int failures;
  char first[256]; /* the first failed call and its message */
} retire_worker_t;

/* Counts a failed call; the first one is kept for the test's message (a
 * worker thread must not assert: cmocka exits silently there). */
static void note_status(retire_worker_t* w, metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return;
  if (w->failures++ == 0) {
    snprintf(w->first, sizeof w->first, "%s: %s: %s", call, metrale_status_name(st),
             metrale_last_error_message());
  }
}

static void* create_use_destroy(void* arg) {
  retire_worker_t* w = arg;
  for (int r = 0; r < 500; ++r) {
    metrale_stream_t* s = NULL;
    metrale_status_t st = metrale_stream_create(w->ctx, &s);
    note_status(w, st, "stream_create");
    if (st != METRALE_OK) continue;
    metrale_devptr_t p[4] = {0};
    for (int i = 0; i < 4; ++i)
      note_status(w, metrale_alloc_async(w->ctx, 100 + (size_t)i * 700, s, &p[i]), "alloc_async");
    if (p[0] != 0) note_status(w, metrale_record_stream(w->ctx, p[0], NULL), "record_stream");
    for (int i = 0; i < 4; ++i)
      if (p[i] != 0) note_status(w, metrale_free_async(w->ctx, p[i], s), "free_async");
    note_status(w, metrale_stream_destroy(w->ctx, s), "stream_destroy");
  }
  atomic_store(w->done, 1);
  return NULL;
}

static void* trim_and_scan(void* arg) {
  retire_worker_t* w = arg;
  for (int i = 0; !atomic_load(w->done); ++i) {
    size_t count = 0;
    if (i & 1) {
      note_status(w, metrale_redzone_scan(w->ctx, NULL, 0, &count), "redzone_scan");
    } else {
      note_status(w, metrale_pool_trim(w->ctx, 0, NULL), "pool_trim");
    }
  }
  return NULL;
}

static void assert_no_failures(const retire_worker_t* w) {
  if (w->failures != 0) print_error("%d failed calls; the first: %s\n", w->failures, w->first);
  assert_int_equal(w->failures, 0);
}

static void streams_destroyed_beside_passes_lose_nothing(void** state) {
  (void)state;
  /* The host backend aborts where the driver would get a destroyed stream
   * (a scan's wait once queried one: a segfault on the GPU). */
  setenv("METRALE_HOST_DEAD_HANDLE_ABORT", "1", 1);
  metrale_context_t* ctx = open_with_pad(PAD);
  atomic_int done = 0;
  retire_worker_t a = {ctx, &done, 0, ""}, b = {ctx, &done, 0, ""};
  pthread_t ta, tb;
  assert_int_equal(pthread_create(&ta, NULL, create_use_destroy, &a), 0);
  assert_int_equal(pthread_create(&tb, NULL, trim_and_scan, &b), 0);
  assert_int_equal(pthread_join(ta, NULL), 0);
  assert_int_equal(pthread_join(tb, NULL), 0);
  assert_no_failures(&a);
  assert_no_failures(&b);
  size_t count = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &count));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  assert_int_equal(mt_ledger(ctx).count, 0);
  metrale_pool_stats_t ps;
  ps.struct_size = sizeof ps;
  MT_OK(metrale_pool_stats(ctx, &ps));
  assert_int_equal(ps.blocks_in_use, 0);
  assert_int_equal(ps.in_use_bytes, 0);
  if (mt_pool_on(ctx)) assert_int_equal(ps.reserved_bytes, 0);
  /* The pool names no dead stream: a new stream allocates and trims. */
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async(ctx, 4096, s, &p));
  MT_OK(metrale_free_async(ctx, p, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  mt_close(ctx);
  unsetenv("METRALE_HOST_DEAD_HANDLE_ABORT");
}

/* ------------------------------------------------------------------ */
/* Kernel timing stays bounded                                          */
/* ------------------------------------------------------------------ */

/* Resident memory in bytes (Linux); 0 where /proc is not there. */
static size_t rss_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  if (f == NULL) return 0;
  unsigned long size = 0, resident = 0;
  int got = fscanf(f, "%lu %lu", &size, &resident);
  fclose(f);
  return got == 2 ? (size_t)resident * (size_t)sysconf(_SC_PAGESIZE) : 0;
}

static void launch_empty(metrale_context_t* ctx, metrale_kernel_t* k, long n) {
  metrale_dim3_t one = {1, 1, 1};
  for (long i = 0; i < n; ++i) {
    metrale_status_t s = metrale_launch(ctx, k, one, one, 0, NULL, NULL);
    if (s != METRALE_OK) MT_OK(s);
  }
}

static const metrale_kernel_timing_t* row_named(const metrale_kernel_timing_t* rows, size_t n,
                                                const char* name) {
  for (size_t i = 0; i < n; ++i)
    if (strcmp(rows[i].kernel, name) == 0) return &rows[i];
  return NULL;
}

static void timing_200k_launches_stays_bounded_and_exact(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.kernel_timing = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = mt_kernel(ctx, "empty_kernel");
  /* Warm up past the pending cap, so the idle events and queues exist. */
  launch_empty(ctx, k, 20000);
  metrale_stream_synchronize(ctx, NULL);
  const size_t before = rss_bytes();
  launch_empty(ctx, k, 200000);
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  const size_t after = rss_bytes();
  /* ASan holds freed memory back (its quarantine): RSS says nothing there,
   * nor under valgrind (a CI run measured 16.2 MiB of growth there). */
#if defined(__SANITIZE_ADDRESS__)
  const int rss_means_something = 0;
#else
  const int rss_means_something = !mt_under_valgrind();
#endif
  if (before != 0 && rss_means_something) {
    /* Unbounded: 200k spans and 400k events, tens of MiB. */
    if (after > before + 16u * 1024 * 1024)
      fail_msg("RSS grew by %zu KiB over 200k timed launches", (after - before) / 1024);
  }
  metrale_kernel_timing_t rows[8];
  size_t n = 0;
  MT_OK(metrale_kernel_timings_read(ctx, rows, 8, &n));
  const metrale_kernel_timing_t* r = row_named(rows, n, MT_KERNEL_MODULE "::empty_kernel");
  assert_non_null(r);
  metrale_counters_t c = mt_counters(ctx);
  /* Host events complete at once: the cap resolves, it never drops. */
  if (mt_is_host(ctx)) assert_int_equal(c.timings_dropped, 0);
  assert_int_equal(r->launches + c.timings_dropped, 220000);
  assert_true(r->total_ms >= 0.0);
  /* Reads add up: more launches land on the same row. */
  launch_empty(ctx, k, 5000);
  MT_OK(metrale_kernel_timings_read(ctx, rows, 8, &n));
  r = row_named(rows, n, MT_KERNEL_MODULE "::empty_kernel");
  c = mt_counters(ctx);
  assert_int_equal(r->launches + c.timings_dropped, 225000);
  mt_close(ctx);
}

static metrale_status_t nothing(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_OK;
}

/* Past 1024 kernels, a new kernel is launched untimed and counted. */
static void timing_rows_are_capped_and_drops_counted(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.kernel_timing = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_require_host(ctx);
  enum { KERNELS = 1030, CAP = 1024 };
  metrale_dim3_t one = {1, 1, 1};
  char name[32];
  for (int i = 0; i < KERNELS; ++i) {
    snprintf(name, sizeof name, "k%d", i);
    MT_OK(metrale_module_register_host(ctx, "many", name, nothing, NULL));
    metrale_kernel_t* k = NULL;
    MT_OK(metrale_kernel_get(ctx, "many", name, &k));
    MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
    MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
  }
  metrale_kernel_timing_t* rows = calloc(KERNELS, sizeof *rows);
  assert_non_null(rows);
  size_t n = 0;
  MT_OK(metrale_kernel_timings_read(ctx, rows, KERNELS, &n));
  assert_int_equal(n, CAP);
  for (size_t i = 0; i < n; ++i) assert_int_equal(rows[i].launches, 2);
  assert_string_equal(rows[CAP - 1].kernel, "many::k1023");
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.timings_dropped, 2 * (KERNELS - CAP));
  assert_int_equal(c.launches, 2 * KERNELS);
  free(rows);
  mt_close(ctx);
}

typedef struct {
  metrale_context_t* ctx;
  metrale_kernel_t* k;
  atomic_int* done;
} launcher_t;

static void* launch_loop(void* arg) {
  launcher_t* l = arg;
  launch_empty(l->ctx, l->k, 30000);
  atomic_fetch_add(l->done, 1);
  return NULL;
}

/* Reads racing timed launches on two threads: no deadlock, nothing lost. */
static void timing_reads_race_launches(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.kernel_timing = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  atomic_int done = 0;
  launcher_t l = {ctx, mt_kernel(ctx, "empty_kernel"), &done};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&t[i], NULL, launch_loop, &l), 0);
  metrale_kernel_timing_t rows[8];
  size_t n = 0;
  while (atomic_load(&done) < 2) MT_OK(metrale_kernel_timings_read(ctx, rows, 8, &n));
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_join(t[i], NULL), 0);
  MT_OK(metrale_kernel_timings_read(ctx, rows, 8, &n));
  const metrale_kernel_timing_t* r = row_named(rows, n, MT_KERNEL_MODULE "::empty_kernel");
  assert_non_null(r);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(r->launches + c.timings_dropped, 60000);
  mt_close(ctx);
}

/* A caller built before timings_dropped existed still gets its counters,
 * and nothing past its struct is written. */
/* metrale_pool_stats is one moment: the blocks waiting for their red-zone
 * check are counted inside in_use, so while frees move blocks on and off
 * that list the waiting ones never outnumber the blocks in use. They did
 * when the list was read apart from the pool's figures (a review saw 3 bad
 * reads in 117k). */
static void pool_stats_read_racing_frees_are_one_moment(void** state) {
  (void)state;
  metrale_context_t* ctx = open_with_pad(64);
  if (!mt_pool_on(ctx)) {
    mt_close(ctx);
    skip();
  }
  atomic_int stop = 0;
  churn_t w[WORKERS];
  pthread_t t[WORKERS];
  start_churn(ctx, w, t, &stop, 1 << 30);
  long bad = 0, reads = 0;
  for (; reads < 200000 && bad == 0; ++reads) {
    metrale_pool_stats_t st = {.struct_size = sizeof st};
    MT_OK(metrale_pool_stats(ctx, &st));
    if (st.pads_pending > st.blocks_in_use || st.pads_pending_bytes > st.in_use_bytes) {
      print_error("read %ld: pads_pending %llu (%llu bytes) > blocks_in_use %llu (%llu bytes)\n",
                  reads, (unsigned long long)st.pads_pending,
                  (unsigned long long)st.pads_pending_bytes, (unsigned long long)st.blocks_in_use,
                  (unsigned long long)st.in_use_bytes);
      ++bad;
    }
    size_t free_bytes = 0;
    if ((reads & 1023) == 0) MT_OK(metrale_free_memory(ctx, &free_bytes));
  }
  atomic_store(&stop, 1);
  assert_int_equal(join_churn(w, t), 0);
  assert_int_equal(bad, 0);
  mt_close(ctx);
}

static void counters_serve_the_older_layout(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 10, &p));
  metrale_counters_t c;
  memset(&c, 0xEE, sizeof c);
  c.struct_size = offsetof(metrale_counters_t, timings_dropped);
  MT_OK(metrale_counters(ctx, &c));
  assert_int_equal(c.allocs, 1);
  assert_int_equal(c.timings_dropped, 0xEEEEEEEEEEEEEEEEull);
  c.struct_size = offsetof(metrale_counters_t, timings_dropped) - 8;
  MT_STATUS(metrale_counters(ctx, &c), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(scan_racing_frees_reports_only_the_real_overflow),
      cmocka_unit_test(scan_and_poison_racing_frees_stay_clean),
      cmocka_unit_test(sweep_racing_frees_keeps_counters_exact),
      cmocka_unit_test(streams_destroyed_beside_passes_lose_nothing),
      cmocka_unit_test(timing_200k_launches_stays_bounded_and_exact),
      cmocka_unit_test(timing_rows_are_capped_and_drops_counted),
      cmocka_unit_test(timing_reads_race_launches),
      cmocka_unit_test(pool_stats_read_racing_frees_are_one_moment),
      cmocka_unit_test(counters_serve_the_older_layout),
  };
  return MT_RUN(tests);
}
