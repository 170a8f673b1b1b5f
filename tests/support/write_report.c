/* For the multi_merge_ledger_reports test: one "rank" on the host backend
 * with two simulated devices, allocating `scale` x 1 MiB at site
 * train.c:10 on device 0 and `scale` x 4 KiB at shard.c:20 on device 1,
 * then printing metrale_alloc_report_all. Usage: write_report SCALE */
#include <metrale_gpu.h>
#include <stdio.h>
#include <stdlib.h>

int main(int argc, char** argv) {
  const int scale = argc > 1 ? atoi(argv[1]) : 1;
  setenv("METRALE_HOST_DEVICES", "2", 1);
  metrale_context_t* ctx[2] = {NULL, NULL};
  for (int d = 0; d < 2; ++d) {
    metrale_context_options_t o;
    metrale_context_options_init(&o);
    o.backend = METRALE_BACKEND_HOST;
    o.device = d;
    if (metrale_context_create(&o, &ctx[d]) != METRALE_OK) return 1;
  }
  metrale_devptr_t p = 0;
  for (int i = 0; i < scale; ++i) {
    if (metrale_alloc_at(ctx[0], 1u << 20, "train.c", 10, &p) != METRALE_OK) return 1;
    if (metrale_alloc_at(ctx[1], 4096, "shard.c", 20, &p) != METRALE_OK) return 1;
  }
  size_t need = 0;
  if (metrale_alloc_report_all(0, 0, NULL, 0, &need) != METRALE_OK) return 1;
  char* text = malloc(need);
  if (text == NULL || metrale_alloc_report_all(0, 0, text, need, &need) != METRALE_OK) return 1;
  fputs(text, stdout);
  free(text);
  metrale_log_set_level(METRALE_LOG_OFF);
  for (int d = 0; d < 2; ++d) metrale_context_destroy(ctx[d]); /* sweeps */
  return 0;
}
