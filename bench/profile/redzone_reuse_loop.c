/* Padded alloc+free pairs with and without METRALE_REDZONE_REUSE, against
 * the pool without red zones, in one process: each mode a context of its
 * own (1k other 256 B blocks live), rounds of N pairs interleaved across
 * the modes, min and median ns/pair per mode. The modes' own warm-up (the
 * first batch checks and fills) is one untimed round.
 *   cc -O2 -Iinclude bench/profile/redzone_reuse_loop.c -Lbuild -lmetrale_gpu \
 *      -Wl,-rpath,$PWD/build -o /tmp/redzone_reuse_loop
 *   /tmp/redzone_reuse_loop [bytes=256] [backend: 1 cuda, 2 host] [pairs=2000000]
 * Figures of one run are in bench/results/2026-12-06-r18-redzone-reuse-host.md. */
#include <metrale_gpu.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

enum { MODES = 5, ROUNDS = 7 };
static const char* names[MODES] = {"pool", "redzone64", "redzone64_reuse4", "redzone64_reuse8",
                                   "redzone64_reuse16"};
static const char* reuse[MODES] = {"1", "1", "4", "8", "16"};

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec * 1e9 + t.tv_nsec;
}
static int cmp(const void* a, const void* b) {
  double x = *(const double*)a, y = *(const double*)b;
  return x < y ? -1 : x > y;
}
static int pairs(metrale_context_t* c, size_t bytes, long n) {
  for (long i = 0; i < n; ++i) {
    metrale_devptr_t d;
    if (metrale_alloc(c, bytes, &d) != METRALE_OK || metrale_free(c, d) != METRALE_OK) {
      printf("failed: %s\n", metrale_last_error_message());
      return 0;
    }
  }
  return 1;
}

int main(int argc, char** argv) {
  size_t bytes = argc > 1 ? strtoull(argv[1], 0, 0) : 256;
  int backend = argc > 2 ? atoi(argv[2]) : 1;
  long n = argc > 3 ? atol(argv[3]) : 2000000;
  metrale_context_t* ctx[MODES];
  double t[MODES][ROUNDS];
  for (int m = 0; m < MODES; ++m) {
    setenv("METRALE_REDZONE_REUSE", reuse[m], 1);
    metrale_context_options_t o;
    metrale_context_options_init(&o);
    o.backend = backend == 1 ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST;
    o.redzone_bytes = m == 0 ? 0 : 64;
    if (metrale_context_create(&o, &ctx[m]) != METRALE_OK) {
      printf("%s\n", metrale_last_error_message());
      return 1;
    }
    for (int i = 0; i < 1000; ++i) {
      metrale_devptr_t d;
      metrale_alloc(ctx[m], 256, &d);
    }
    if (!pairs(ctx[m], bytes, n)) return 1;
  }
  unsetenv("METRALE_REDZONE_REUSE");
  for (int r = 0; r < ROUNDS; ++r)
    for (int m = 0; m < MODES; ++m) {
      double t0 = now();
      if (!pairs(ctx[m], bytes, n)) return 1;
      t[m][r] = (now() - t0) / (double)n;
    }
  for (int m = 0; m < MODES; ++m) {
    qsort(t[m], ROUNDS, sizeof t[m][0], cmp);
    metrale_pool_stats_t s = {.struct_size = sizeof s};
    metrale_pool_stats(ctx[m], &s);
    printf("%-18s %zu B: min %.1f median %.1f ns/pair (%.2fx the pool's median); checks %llu, "
           "pads checked %llu, fills %llu\n",
           names[m], bytes, t[m][0], t[m][ROUNDS / 2], t[m][ROUNDS / 2] / t[0][ROUNDS / 2],
           (unsigned long long)s.pad_checks, (unsigned long long)s.pads_checked,
           (unsigned long long)s.pad_fills);
    metrale_context_destroy(ctx[m]);
  }
  return 0;
}
