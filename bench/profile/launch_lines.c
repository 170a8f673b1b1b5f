/* Data cache lines one metrale_launch reads from outside L1, for callgrind's
 * cache simulation (bench/profile/launch_lines.sh): the host backend, an
 * empty host kernel on a stream of ours, and 4 MiB of other data touched
 * between launches, as the driver's own launch does on a GPU (it evicts our
 * lines; r19's diagnosis). Only one_launch() is counted (--toggle-collect).
 * Usage: launch_lines [launches]   (default 2000) */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "metrale_gpu.h"
static metrale_status_t empty_kernel(const metrale_host_kernel_call_t* c, void* u) { (void)c; (void)u; return METRALE_OK; }
static volatile unsigned char* junk;
__attribute__((noinline)) static void evict(void) {
  for (size_t i = 0; i < (4u << 20); i += 64) junk[i]++;
}
__attribute__((noinline)) int one_launch(metrale_context_t* ctx, metrale_kernel_t* k, metrale_stream_t* s, void** params) {
  const metrale_dim3_t one = {1, 1, 1};
  return metrale_launch(ctx, k, one, one, 0, s, params);
}
int main(int argc, char** argv) {
  int n = argc > 1 ? atoi(argv[1]) : 2000;
  junk = malloc(4u << 20);
  memset((void*)junk, 1, 4u << 20);
  metrale_log_set_level(METRALE_LOG_WARN);
  metrale_context_options_t o; metrale_context_options_init(&o); o.backend = METRALE_BACKEND_HOST;
  metrale_context_t* ctx; if (metrale_context_create(&o, &ctx)) return 1;
  metrale_kernel_t* k;
  if (metrale_module_register_host(ctx, "bench", "empty", empty_kernel, NULL) || metrale_kernel_get(ctx, "bench", "empty", &k)) { printf("%s\n", metrale_last_error_message()); return 1; }
  metrale_stream_t* s; metrale_stream_create(ctx, &s);
  for (int i = 0; i < n; ++i) { evict(); if (one_launch(ctx, k, s, NULL)) { printf("%s\n", metrale_last_error_message()); return 1; } }
  metrale_stream_synchronize(ctx, s);
  metrale_context_destroy(ctx);
  return 0;
}
