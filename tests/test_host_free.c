/* Host backend, pool off: a free of memory a host kernel is still using.
 * The driver's cuMemFree waits for the device's work before the memory
 * goes back; the host backend must not pull it from under a kernel running
 * on another thread either (a use after free inside the emulator, which
 * could hide or fake bugs in tests). The free itself must not wait for
 * such a kernel in a way that deadlocks: called from a host kernel, or
 * while a kernel on another stream runs. Every case runs under a watchdog:
 * a deadlock fails it instead of hanging the suite. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "failing_new.h"
#include "launch_thread.h"
#include "test_support.h"

#define BYTES 256 /* a small block: the C heap writes its free-list links into it */

static const metrale_dim3_t one = {1, 1, 1};

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "\n[  FAILED  ] watchdog: a case did not finish in time (a deadlock?)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static metrale_context_t* open_without_pool(void) {
  metrale_context_options_t o = mt_options();
  metrale_context_t* ctx = NULL;
  MT_OK(mt_create_without_pool(&o, &ctx));
  mt_require_host(ctx);
  return ctx;
}

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s;
  metrale_devptr_t p;
  int started, freed;
  size_t changed; /* bytes of p the kernel found changed after the free */
  mt_launch_thread_t runner;
} user_t;

/* Runs until told the block was freed, then reads it: the block is still
 * the kernel's (its work was queued before the free). */
static metrale_status_t read_after_free(const metrale_host_kernel_call_t* call, void* arg) {
  (void)call;
  user_t* u = arg;
  __atomic_store_n(&u->started, 1, __ATOMIC_SEQ_CST);
  while (!__atomic_load_n(&u->freed, __ATOMIC_SEQ_CST)) usleep(1000);
  const volatile unsigned char* b = (const volatile unsigned char*)(uintptr_t)u->p;
  for (size_t i = 0; i < BYTES; ++i) u->changed += b[i] != 0x11;
  return METRALE_OK;
}

static void start_user(metrale_context_t* ctx, user_t* u) {
  memset(u, 0, sizeof *u);
  u->ctx = ctx;
  MT_OK(metrale_stream_create(ctx, &u->s));
  MT_OK(metrale_module_register_host(ctx, "host_free", "read_after_free", read_after_free, u));
  MT_OK(metrale_alloc(ctx, BYTES, &u->p));
  MT_OK(metrale_memset(ctx, u->p, 0x11, BYTES));
  mt_launch_thread_start(&u->runner, ctx, "host_free", "read_after_free", u->s, &u->started);
}

/* Lets the kernel read the freed block and checks what it found. */
static void finish_user(user_t* u) {
  __atomic_store_n(&u->freed, 1, __ATOMIC_SEQ_CST);
  MT_OK(mt_launch_thread_join(&u->runner));
  assert_int_equal(u->changed, 0);
}

/* The free returns while the kernel runs (it never waits for it), and the
 * kernel still finds its bytes as they were: the memory went back to the
 * heap only after the kernel returned. Before, the heap wrote its links
 * into the freed block under the kernel. */
static void a_running_host_kernel_keeps_the_memory_it_uses(void** state) {
  (void)state;
  metrale_context_t* ctx = open_without_pool();
  user_t u;
  start_user(ctx, &u);
  MT_OK(metrale_free(ctx, u.p));
  assert_int_equal(mt_ledger(ctx).count, 0);
  /* Gone for the library at once: no call accepts it any more. */
  MT_STATUS(metrale_memset(ctx, u.p, 0, BYTES), METRALE_ERROR_INVALID_ARGUMENT);
  /* Another allocation meanwhile gets other memory. */
  metrale_devptr_t q = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &q));
  assert_true(q != u.p);
  MT_OK(metrale_memset(ctx, q, 0x77, BYTES));
  finish_user(&u);
  MT_OK(metrale_free(ctx, q));
  MT_OK(metrale_stream_destroy(ctx, u.s));
  mt_close(ctx);
}

typedef struct {
  metrale_context_t* ctx;
  metrale_devptr_t p;
  metrale_status_t freed;
} self_free_t;

static metrale_status_t free_from_kernel(const metrale_host_kernel_call_t* call, void* arg) {
  (void)call;
  self_free_t* f = arg;
  f->freed = metrale_free(f->ctx, f->p);
  return METRALE_OK;
}

/* A host kernel frees memory while a kernel on another stream runs: the
 * free neither waits for its own stream (its work is the caller) nor for
 * the other kernel (which may wait for this one), and completes. */
static void a_free_from_a_host_kernel_completes(void** state) {
  (void)state;
  metrale_context_t* ctx = open_without_pool();
  user_t u;
  start_user(ctx, &u);
  self_free_t f = {ctx, 0, METRALE_ERROR_INTERNAL};
  metrale_stream_t* s = NULL;
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_module_register_host(ctx, "host_free", "free_from_kernel", free_from_kernel, &f));
  MT_OK(metrale_kernel_get(ctx, "host_free", "free_from_kernel", &k));
  for (int own = 0; own <= 1; ++own) {
    /* Its own block, then the one the running kernel reads. */
    if (own == 0) {
      MT_OK(metrale_alloc(ctx, BYTES, &f.p));
    } else {
      f.p = u.p;
    }
    MT_OK(metrale_launch(ctx, k, one, one, 0, s, NULL));
    MT_OK(f.freed);
  }
  assert_int_equal(mt_ledger(ctx).count, 0);
  finish_user(&u);
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_stream_destroy(ctx, u.s));
  mt_close(ctx);
}

typedef struct {
  pthread_mutex_t lock;
  int hits;
  char last[512];
} warned_t;

static warned_t warned = {PTHREAD_MUTEX_INITIALIZER, 0, ""};
/* The block the next case leaks on purpose: held here, it stays reachable
 * for the leak checkers (ASan's, valgrind's); volatile, so the store stays. */
static volatile metrale_devptr_t kept_block;

static void on_log(metrale_log_level_t level, const char* message, void* user) {
  warned_t* w = user;
  if (level != METRALE_LOG_WARN || message == NULL || strstr(message, "stays allocated") == NULL)
    return;
  pthread_mutex_lock(&w->lock);
  w->hits++;
  snprintf(w->last, sizeof w->last, "%s", message);
  pthread_mutex_unlock(&w->lock);
}

/* Each allocation of the free fails in turn while a kernel on another
 * thread reads the block. Until the free's last allocation, the free fails
 * and changes nothing (the block stays the caller's). When only queuing
 * the release behind the kernel has no memory, the free succeeds, the
 * block is never freed (not under that kernel), and a warning says so: no
 * silent leak. */
static void a_free_short_of_memory_behind_a_kernel_warns_of_its_leak(void** state) {
  (void)state;
  if (mt_under_valgrind()) skip(); /* operator new is valgrind's there */
  assert_true(mt_fail_new_works());
  metrale_context_t* ctx = open_without_pool();
  user_t u;
  start_user(ctx, &u);
  kept_block = u.p;
  pthread_mutex_lock(&warned.lock);
  warned.hits = 0;
  pthread_mutex_unlock(&warned.lock);
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(on_log, &warned));
  metrale_status_t st = METRALE_ERROR_INTERNAL;
  long left = -1;
  int n = 1;
  for (; n <= 64; ++n) {
    mt_fail_new_after(n);
    st = metrale_free(ctx, u.p);
    left = mt_fail_new_left();
    mt_fail_new_after(0);
    if (st == METRALE_OK) break;
    if (st != METRALE_ERROR_OUT_OF_MEMORY) fail_msg("n=%d: %s", n, metrale_last_error_message());
    assert_int_equal(mt_ledger(ctx).count, 1); /* a failed free keeps the block */
  }
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(st);
  /* The allocation that failed was the last one the free makes. */
  if (left != 0) fail_msg("n=%d: the free succeeded with no allocation failed", n);
  pthread_mutex_lock(&warned.lock);
  const int hits = warned.hits;
  pthread_mutex_unlock(&warned.lock);
  if (hits != 1) fail_msg("n=%d: %d warnings of the leak, not 1", n, hits);
  assert_int_equal(mt_ledger(ctx).count, 0);
  MT_STATUS(metrale_memset(ctx, u.p, 0, BYTES), METRALE_ERROR_INVALID_ARGUMENT);
  finish_user(&u);
  MT_OK(metrale_stream_destroy(ctx, u.s));
  mt_close(ctx);
}

static int arm_watchdog(void** state) {
  (void)state;
  signal(SIGALRM, on_alarm);
  alarm(60);
  return 0;
}

static int disarm_watchdog(void** state) {
  (void)state;
  alarm(0);
  return 0;
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(a_running_host_kernel_keeps_the_memory_it_uses,
                                      arm_watchdog, disarm_watchdog),
      cmocka_unit_test_setup_teardown(a_free_from_a_host_kernel_completes, arm_watchdog,
                                      disarm_watchdog),
      cmocka_unit_test_setup_teardown(a_free_short_of_memory_behind_a_kernel_warns_of_its_leak,
                                      arm_watchdog, disarm_watchdog),
  };
  return MT_RUN(tests);
}
