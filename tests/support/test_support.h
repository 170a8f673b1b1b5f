/* Shared helpers for the cmocka suites: context creation on the backend
 * METRALE_TEST_BACKEND names, the test kernels on either backend, status
 * assertions that also demand a message, and ledger snapshots. */
#ifndef METRALE_TEST_SUPPORT_H
#define METRALE_TEST_SUPPORT_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "metrale_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

#define MT_KERNEL_MODULE "test_kernels"

/* The backend the suite runs on: METRALE_TEST_BACKEND=host|cuda, default host. */
metrale_backend_t mt_backend(void);
const char* mt_backend_name(void);

/* Options initialised with the defaults and the test backend. */
metrale_context_options_t mt_options(void);

/* Creates a context with opts (NULL = mt_options()). On the cuda backend a
 * NO_DRIVER / NO_DEVICE answer skips the running case, printing why. Any
 * other failure fails the case. */
metrale_context_t* mt_open(const metrale_context_options_t* opts);
/* Destroys ctx and asserts it succeeded. */
void mt_close(metrale_context_t* ctx);

/* Makes module "test_kernels" available in ctx: C equivalents registered on
 * the host backend, the fatbin from METRALE_TEST_KERNELS on cuda (the case
 * skips when that variable is empty: no nvcc at build time). */
void mt_load_kernels(metrale_context_t* ctx);
/* Looks a test kernel up and asserts it was found. */
metrale_kernel_t* mt_kernel(metrale_context_t* ctx, const char* func);

/* Skips the running case unless ctx runs on the host backend. */
void mt_require_host(metrale_context_t* ctx);
int mt_is_host(metrale_context_t* ctx);
/* metrale_context_create(opts, &ctx) with the caching pool off, whatever
 * METRALE_POOL says (it is set to 0 for the call and put back): for cases
 * about driver allocations. Returns the status. */
metrale_status_t mt_create_without_pool(metrale_context_options_t* opts, metrale_context_t** ctx);
/* metrale_pool_stats, asserted OK (the current layout). */
metrale_pool_stats_t mt_pool_stats(metrale_context_t* ctx);
/* 1 when metrale_alloc serves from the caching pool (metrale_pool_stats). */
int mt_pool_on(metrale_context_t* ctx);
/* 1 under valgrind (it preloads its vgpreload libraries into every
 * client): races that need many thread switches run fewer rounds there. */
int mt_under_valgrind(void);

/* Launch shorthands for the test kernels (one block of up to 256 threads
 * per 256 elements). Return the launch status. */
metrale_status_t mt_fill_u32(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t p,
                             uint32_t value, uint64_t n);
metrale_status_t mt_add_f32(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t a,
                            metrale_devptr_t b, metrale_devptr_t c, uint64_t n);
metrale_status_t mt_overflow_write(metrale_context_t* ctx, metrale_devptr_t p, uint64_t bytes,
                                   uint64_t extra, uint32_t value);

/* The library's error-level log lines, one per line, while kept: from
 * mt_keep_errors() (which empties the text and sets the log callback) to
 * mt_stop_keeping_errors(). The text is mt_errors(). */
void mt_keep_errors(void);
void mt_stop_keeping_errors(void);
const char* mt_errors(void);

/* A ledger snapshot: live count and live bytes. */
typedef struct mt_ledger {
  size_t count;
  size_t bytes;
} mt_ledger_t;
mt_ledger_t mt_ledger(metrale_context_t* ctx);

/* The counters, struct_size set, asserted OK. */
metrale_counters_t mt_counters(metrale_context_t* ctx);

/* Status checks. mt_check_status fails the case when got != want, printing
 * both names and the message; when want is not OK it also demands a
 * non-empty metrale_last_error_message(). */
void mt_check_status(metrale_status_t got, metrale_status_t want, const char* expr,
                     const char* file, int line);
#define MT_OK(expr) mt_check_status((expr), METRALE_OK, #expr, __FILE__, __LINE__)
#define MT_STATUS(expr, want) mt_check_status((expr), (want), #expr, __FILE__, __LINE__)

void mt_check_ledger(metrale_context_t* ctx, mt_ledger_t before, const char* file, int line);
#define MT_LEDGER_SAME(ctx, before) mt_check_ledger((ctx), (before), __FILE__, __LINE__)

/* Asserts the last error message contains needle (case-sensitive). */
void mt_check_message_has(const char* needle, const char* file, int line);
#define MT_MESSAGE_HAS(needle) mt_check_message_has((needle), __FILE__, __LINE__)

/* Copies bytes of device memory to a fresh buffer the caller frees. */
void* mt_read_device(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes);

/* Runs only the cases METRALE_TEST_FILTER names (cmocka's filter: a name,
 * or a pattern with * and ?), all when it is unset. */
void mt_apply_filter(void);

/* Runs the cmocka group, printing the backend first. */
#define MT_RUN(tests)                                         \
  (mt_apply_filter(), printf("[ backend  ] %s\n", mt_backend_name()), \
   cmocka_run_group_tests((tests), NULL, NULL))

#ifdef __cplusplus
}
#endif

#endif
