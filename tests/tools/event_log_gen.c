/* Writes a small, deterministic event log through the public API, for the
 * replay and timeline tests: four sites (weights kept live, activations
 * allocated and freed each step, input batches, a side stream), one
 * out-of-memory failure and one red-zone scan.
 * Usage: event_log_gen LOG   (backend: METRALE_TEST_BACKEND, default host)
 * Exit 0 when every call answered as expected. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "metrale_gpu.h"

static int check(metrale_status_t got, metrale_status_t want, const char* what) {
  if (got == want) return 1;
  fprintf(stderr, "event_log_gen: %s: %s (wanted %s): %s\n", what, metrale_status_name(got),
          metrale_status_name(want), metrale_last_error_message());
  exit(1);
}

int main(int argc, char** argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: event_log_gen LOG\n");
    return 2;
  }
  const char* b = getenv("METRALE_TEST_BACKEND");
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = b != NULL && strcmp(b, "cuda") == 0 ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST;
  opts.redzone_bytes = 64;
  metrale_context_t* ctx = NULL;
  check(metrale_context_create(&opts, &ctx), METRALE_OK, "metrale_context_create");
  check(metrale_event_log_open(ctx, argv[1]), METRALE_OK, "metrale_event_log_open");

  metrale_devptr_t weights[4];
  for (int i = 0; i < 4; ++i) {
    check(metrale_alloc_at(ctx, (size_t)1 << 20, "model/encoder.py", 10, &weights[i]), METRALE_OK,
          "weights");
  }
  metrale_stream_t* side = NULL;
  check(metrale_stream_create(ctx, &side), METRALE_OK, "metrale_stream_create");
  for (int step = 0; step < 20; ++step) {
    metrale_devptr_t batch = 0, act[8], prefetch = 0;
    check(metrale_alloc_at(ctx, 256u << 10, "data/loader.py", 7, &batch), METRALE_OK, "batch");
    check(metrale_alloc_async_at(ctx, 128u << 10, side, "model/stream.py", 3, &prefetch),
          METRALE_OK, "prefetch");
    for (int i = 0; i < 8; ++i) {
      check(metrale_alloc_at(ctx, (size_t)(64u << 10) * (size_t)(1 + (step + i) % 3),
                             "model/attention.py", 42, &act[i]),
            METRALE_OK, "activation");
    }
    for (int i = 7; i >= 0; --i) check(metrale_free(ctx, act[i]), METRALE_OK, "free activation");
    check(metrale_free_async(ctx, prefetch, side), METRALE_OK, "free prefetch");
    check(metrale_free(ctx, batch), METRALE_OK, "free batch");
  }
  metrale_devptr_t huge = 0;
  check(metrale_alloc_at(ctx, (size_t)1 << 62, "model/huge.py", 1, &huge),
        METRALE_ERROR_OUT_OF_MEMORY, "the huge allocation");
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  check(metrale_redzone_scan(ctx, v, 4, &n), METRALE_OK, "metrale_redzone_scan");
  for (int i = 0; i < 4; ++i) check(metrale_free(ctx, weights[i]), METRALE_OK, "free weights");
  check(metrale_stream_destroy(ctx, side), METRALE_OK, "metrale_stream_destroy");
  check(metrale_event_log_close(ctx), METRALE_OK, "metrale_event_log_close");
  check(metrale_context_destroy(ctx), METRALE_OK, "metrale_context_destroy");
  return 0;
}
