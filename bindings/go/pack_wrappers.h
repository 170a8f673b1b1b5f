/* pack_wrappers.h: the mg_ wrappers (see wrappers.h) of the packing rule's
 * calls: host kernels with alignments, a kernel's layout, and packed
 * launches with the caller's layout. */
#ifndef METRALE_GO_PACK_WRAPPERS_H
#define METRALE_GO_PACK_WRAPPERS_H

#include "wrappers.h"

static inline metrale_status_t mg_module_register_host_layout(char** err, mg_ctx* c, const char* m, const char* f, void* fn, void* user, const size_t* sizes, const size_t* aligns, size_t n) { MG_CALL(metrale_module_register_host_layout(c, m, f, (metrale_host_kernel_fn)fn, user, sizes, aligns, n)); }
static inline metrale_status_t mg_kernel_param_layout(char** err, mg_ctx* c, metrale_kernel_t* k, size_t* offsets, size_t* sizes, size_t cap, size_t* count) { MG_CALL(metrale_kernel_param_layout(c, k, offsets, sizes, cap, count)); }
static inline metrale_status_t mg_launch_packed_layout(char** err, mg_ctx* c, metrale_kernel_t* k, metrale_dim3_t g, metrale_dim3_t b, uint32_t sh, metrale_stream_t* st, const void* args, size_t n, const size_t* offsets, const size_t* sizes, size_t nparams) { MG_CALL(metrale_launch_packed_layout(c, k, g, b, sh, st, args, n, offsets, sizes, nparams)); }

#endif
