/* Instructions per pooled metrale_alloc + metrale_free pair, for callgrind
 * (bench/profile/pair_ir.sh builds and runs it): the host backend, pool on,
 * the call site recorded (the metrale_alloc / metrale_free macros), `live`
 * other 256 B blocks held, one size allocated and freed in a loop. Only
 * run_pairs() is counted (--toggle-collect), so Ir / pairs is the cost of
 * one pair through the public API.
 * Usage: pair_ir [pairs] [live] [bytes]   (defaults 10000 1000 1048576) */
#include <stdio.h>
#include <stdlib.h>

#include "metrale_gpu.h"

__attribute__((noinline)) static int run_pairs(metrale_context_t* ctx, size_t n, size_t bytes) {
  for (size_t i = 0; i < n; ++i) {
    metrale_devptr_t d = 0;
    if (metrale_alloc(ctx, bytes, &d) != METRALE_OK) return 1;
    if (metrale_free(ctx, d) != METRALE_OK) return 1;
  }
  return 0;
}

int main(int argc, char** argv) {
  size_t pairs = argc > 1 ? strtoull(argv[1], NULL, 10) : 10000;
  size_t live = argc > 2 ? strtoull(argv[2], NULL, 10) : 1000;
  size_t bytes = argc > 3 ? strtoull(argv[3], NULL, 10) : (size_t)1 << 20;
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = METRALE_BACKEND_HOST;
  opts.pool = 1;
  metrale_context_t* ctx = NULL;
  if (metrale_context_create(&opts, &ctx) != METRALE_OK) {
    fprintf(stderr, "create: %s\n", metrale_last_error_message());
    return 1;
  }
  metrale_devptr_t* held = calloc(live + 1, sizeof *held);
  for (size_t i = 0; i < live; ++i) {
    if (metrale_alloc(ctx, 256, &held[i]) != METRALE_OK) return 1;
  }
  if (run_pairs(ctx, 1000, bytes) != 0) return 1; /* warm: bins, sites, caches */
  if (run_pairs(ctx, pairs, bytes) != 0) {
    fprintf(stderr, "pair: %s\n", metrale_last_error_message());
    return 1;
  }
  for (size_t i = 0; i < live; ++i) metrale_free(ctx, held[i]);
  free(held);
  metrale_context_destroy(ctx);
  printf("pairs %zu live %zu bytes %zu\n", pairs, live, bytes);
  return 0;
}
