/* A host kernel run from a thread of its own (support/launch_thread.c):
 * the thread launches it on a stream and so holds that stream while the
 * kernel runs, which is how a suite gets "a kernel another thread is
 * running" (host backend). */
#ifndef METRALE_TEST_LAUNCH_THREAD_H
#define METRALE_TEST_LAUNCH_THREAD_H

#include <pthread.h>

#include "metrale_gpu.h"

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s;
  const char* module;
  const char* kernel;
  metrale_status_t launched; /* kernel_get's or launch's status; read after the join */
  pthread_t thread;
} mt_launch_thread_t;

/* Starts a thread that launches module/kernel (one block of one thread, no
 * arguments) on s; with `started`, returns once the kernel set *started
 * (an int it writes with __atomic_store_n). Fails the case when the thread
 * cannot start. */
void mt_launch_thread_start(mt_launch_thread_t* l, metrale_context_t* ctx, const char* module,
                            const char* kernel, metrale_stream_t* s, const int* started);
/* Waits for the thread; returns its launch's status. */
metrale_status_t mt_launch_thread_join(mt_launch_thread_t* l);
/* Waits (1 ms sleeps) until *flag is non-zero. */
void mt_wait_flag(const int* flag);

#endif
