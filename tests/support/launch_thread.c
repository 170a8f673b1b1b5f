#include "launch_thread.h"

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

static void* run_launch(void* arg) {
  mt_launch_thread_t* l = arg;
  const metrale_dim3_t one = {1, 1, 1};
  metrale_kernel_t* k = NULL;
  l->launched = metrale_kernel_get(l->ctx, l->module, l->kernel, &k);
  if (l->launched == METRALE_OK) l->launched = metrale_launch(l->ctx, k, one, one, 0, l->s, NULL);
  return NULL;
}

void mt_launch_thread_start(mt_launch_thread_t* l, metrale_context_t* ctx, const char* module,
                            const char* kernel, metrale_stream_t* s, const int* started) {
  memset(l, 0, sizeof *l);
  l->ctx = ctx;
  l->s = s;
  l->module = module;
  l->kernel = kernel;
  l->launched = METRALE_ERROR_INTERNAL;
  assert_int_equal(pthread_create(&l->thread, NULL, run_launch, l), 0);
  if (started != NULL) mt_wait_flag(started);
}

metrale_status_t mt_launch_thread_join(mt_launch_thread_t* l) {
  assert_int_equal(pthread_join(l->thread, NULL), 0);
  return l->launched;
}

void mt_wait_flag(const int* flag) {
  while (!__atomic_load_n(flag, __ATOMIC_SEQ_CST)) usleep(1000);
}
