#ifndef METRALE_TEST_HOST_KERNELS_H
#define METRALE_TEST_HOST_KERNELS_H

#include "metrale_gpu.h"

/* Registers the C test kernels under `module` with their parameter sizes.
 * empty_kernel is registered with zero parameters. */
metrale_status_t mt_register_host_kernels(metrale_context_t* ctx, const char* module);

#endif
