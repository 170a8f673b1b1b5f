/* Compiled as C11 with -Wall -Wextra -pedantic -Werror: the header must be
 * clean, self-contained C. Uses a few types and macros without linking. */
#include "metrale_gpu.h"

#include <stddef.h>

int main(void) {
  metrale_dim3_t grid = {1, 2, 3};
  metrale_counters_t counters = {sizeof(metrale_counters_t), 0, 0, 0, 0, 0, 0, 0, 0, 0,
                                 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
  metrale_context_options_t opts;
  metrale_status_t status = METRALE_ERROR_BUFFER_TOO_SMALL;
  metrale_devptr_t ptr = (metrale_devptr_t)0;
  unsigned char pattern = (unsigned char)METRALE_REDZONE_PATTERN;
  metrale_host_kernel_fn fn = NULL;
  metrale_log_fn log_fn = NULL;
  opts.struct_size = sizeof opts;
  opts.backend = METRALE_BACKEND_HOST;
  (void)fn;
  (void)log_fn;
  (void)ptr;
  if (METRALE_VERSION_MAJOR < 0 || grid.z != 3 || counters.struct_size == 0) return 1;
  if (status != 11 || pattern != 0xA5 || opts.backend != 2) return 1;
  if (METRALE_TRACE_MAX_ARGS != 8 || METRALE_EVENT_DISABLE_TIMING == METRALE_EVENT_DEFAULT) return 1;
  return sizeof(metrale_trace_entry_t) > 0 ? 0 : 1;
}
