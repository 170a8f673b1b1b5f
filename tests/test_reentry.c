/* Rule 5 of the header: what a log callback and a host kernel may call.
 * A callback may call the library (lines it causes go to stderr, not back
 * into it); metrale_log_set_callback returns only once the old callback has
 * returned everywhere, and is refused from inside the callback; a host
 * kernel may not wait for its own stream nor destroy its own context or
 * stream; two host kernels that wait for each other's streams never
 * deadlock. Every case runs under a watchdog (alarm): a deadlock fails the
 * suite instead of hanging it. */
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

/* --- watchdog and small helpers ------------------------------------------ */

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "\n[  FAILED  ] watchdog: a case did not finish in time (a deadlock?)\n";
  ssize_t ignored = write(STDOUT_FILENO, msg, sizeof msg - 1);
  (void)ignored;
  _exit(3);
}

static void watchdog_arm(void) {
  signal(SIGALRM, on_alarm);
  alarm(20);
}

static void watchdog_disarm(void) { alarm(0); }

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* Waits until *flag reaches want or 5 s pass; returns whether it did. */
static int wait_for(const int* flag, int want) {
  const double deadline = now_s() + 5.0;
  while (__atomic_load_n(flag, __ATOMIC_ACQUIRE) < want) {
    if (now_s() > deadline) return 0;
    usleep(1000);
  }
  return 1;
}

static int has(const char* haystack, const char* needle) {
  return strstr(haystack, needle) != NULL;
}

static int teardown(void** state) {
  (void)state;
  watchdog_disarm();
  metrale_log_set_callback(NULL, NULL);
  metrale_log_set_level(METRALE_LOG_WARN);
  return 0;
}

/* A warning from thread-free library code: a sweep of a leaked allocation. */
static metrale_status_t leak_and_sweep(metrale_context_t* ctx) {
  metrale_devptr_t p = 0;
  metrale_status_t st = metrale_alloc_at(ctx, 64, "reentry_leak.c", 7, &p);
  if (st != METRALE_OK) return st;
  size_t n = 0;
  return metrale_sweep_unreleased(ctx, &n);
}

/* --- log callback ----------------------------------------------------------- */

static __thread int t_cb_depth;
static int nested_delivery;
static int cb_ran;
static metrale_context_t* made_in_cb;
static metrale_status_t cb_create, cb_sweep, cb_level, cb_destroy;
static int cb_destroy_message_ok;

static void reentrant_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)message;
  (void)user;
  if (t_cb_depth > 0) __atomic_store_n(&nested_delivery, 1, __ATOMIC_RELAXED);
  ++t_cb_depth;
  if (!__atomic_exchange_n(&cb_ran, 1, __ATOMIC_ACQ_REL)) {
    metrale_context_options_t opts = mt_options();
    cb_create = metrale_context_create(&opts, &made_in_cb); /* logs at debug */
    if (cb_create == METRALE_OK) {
      cb_sweep = leak_and_sweep(made_in_cb); /* logs a warning */
      cb_destroy = metrale_context_destroy(made_in_cb);
      cb_destroy_message_ok = has(metrale_last_error_message(), "log callback");
    }
    cb_level = metrale_log_set_level(METRALE_LOG_DEBUG);
  }
  --t_cb_depth;
}

/* The callback calls functions that log, at debug level: no deadlock, no
 * recursion into the callback; destroy is the one refused call. */
static void callback_calls_library_that_logs(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  watchdog_arm();
  cb_ran = nested_delivery = 0;
  made_in_cb = NULL;
  MT_OK(metrale_log_set_level(METRALE_LOG_DEBUG));
  MT_OK(metrale_log_set_callback(reentrant_log, NULL));
  MT_OK(leak_and_sweep(ctx)); /* the first line: the callback runs */
  MT_OK(metrale_log_set_callback(NULL, NULL));
  watchdog_disarm();
  assert_int_equal(cb_ran, 1);
  assert_int_equal(nested_delivery, 0);
  assert_int_equal(cb_create, METRALE_OK);
  assert_int_equal(cb_sweep, METRALE_OK);
  assert_int_equal(cb_level, METRALE_OK);
  assert_int_equal(cb_destroy, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(cb_destroy_message_ok);
  MT_OK(metrale_context_destroy(made_in_cb)); /* outside the callback it works */
  mt_close(ctx);
}

static int slow_entered, slow_left;

static void slow_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)message;
  (void)user;
  if (__atomic_exchange_n(&slow_entered, 1, __ATOMIC_ACQ_REL)) return; /* only the first */
  usleep(300 * 1000);
  __atomic_store_n(&slow_left, 1, __ATOMIC_RELEASE);
}

static void* sweep_thread(void* arg) {
  return (void*)(intptr_t)leak_and_sweep(arg);
}

static void quiet_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)message;
  (void)user;
}

/* set_callback (to NULL, then to a new one) returns only after a call of the
 * old callback running on another thread has returned. */
static void set_callback_waits_for_running_call(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  watchdog_arm();
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  for (int round = 0; round < 2; ++round) {
    slow_entered = slow_left = 0;
    MT_OK(metrale_log_set_callback(slow_log, NULL));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, sweep_thread, ctx), 0);
    assert_true(wait_for(&slow_entered, 1));
    if (round == 0) {
      MT_OK(metrale_log_set_callback(NULL, NULL));
    } else {
      MT_OK(metrale_log_set_callback(quiet_log, NULL));
    }
    /* Read right after set_callback returned: the old call has ended. */
    assert_int_equal(__atomic_load_n(&slow_left, __ATOMIC_ACQUIRE), 1);
    void* rc = NULL;
    pthread_join(t, &rc);
    assert_int_equal((int)(intptr_t)rc, METRALE_OK);
  }
  MT_OK(metrale_log_set_callback(NULL, NULL));
  watchdog_disarm();
  mt_close(ctx);
}

static int inner_calls;
static metrale_status_t inner_set_null, inner_set_other;
static int inner_message_ok;

static void sets_callback_log(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)message;
  (void)user;
  __atomic_add_fetch(&inner_calls, 1, __ATOMIC_RELAXED);
  inner_set_null = metrale_log_set_callback(NULL, NULL);
  inner_message_ok = has(metrale_last_error_message(), "inside the log callback");
  inner_set_other = metrale_log_set_callback(quiet_log, NULL);
}

/* From inside the callback, set_callback is refused (it would wait for its
 * own caller): no deadlock, and the callback stays installed. */
static void set_callback_from_inside_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  watchdog_arm();
  inner_calls = 0;
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(sets_callback_log, NULL));
  MT_OK(leak_and_sweep(ctx));
  assert_true(inner_calls >= 1);
  assert_int_equal(inner_set_null, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(inner_set_other, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(inner_message_ok);
  const int before = inner_calls;
  MT_OK(leak_and_sweep(ctx)); /* still the installed callback */
  assert_true(inner_calls > before);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  watchdog_disarm();
  mt_close(ctx);
}

/* --- host kernels ----------------------------------------------------------- */

typedef struct {
  metrale_context_t* ctx;
  metrale_context_t* other_ctx;
  metrale_stream_t* own;   /* the stream the kernel is launched on (NULL: default) */
  metrale_stream_t* other; /* an idle stream of ctx */
  metrale_devptr_t buf;
  metrale_status_t destroy_own, destroy_other;
  int destroy_message_ok;
  metrale_status_t sync_own, sync_other, memset_async_own, memset_sync, copy_d2h_own,
      stream_destroy_own, alloc, live;
  int sync_message_ok;
} kernel_probe_t;

static metrale_status_t destroying_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  kernel_probe_t* p = user;
  p->destroy_own = metrale_context_destroy(p->ctx);
  p->destroy_message_ok = has(metrale_last_error_message(), "host kernel");
  if (p->other_ctx != NULL) p->destroy_other = metrale_context_destroy(p->other_ctx);
  return METRALE_OK;
}

static metrale_kernel_t* register_kernel(metrale_context_t* ctx, const char* func,
                                         metrale_host_kernel_fn fn, void* user) {
  MT_OK(metrale_module_register_host(ctx, "reentry", func, fn, user));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "reentry", func, &k));
  return k;
}

static const metrale_dim3_t one = {1, 1, 1};

/* A host kernel that destroys its own context gets INVALID_ARGUMENT; the
 * launch completes and the context stays usable. Another context it may
 * destroy. (Under ASan a destroy that went through is a use after free.) */
static void kernel_destroying_own_context_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  watchdog_arm();
  kernel_probe_t p = {0};
  p.ctx = ctx;
  p.other_ctx = mt_open(NULL);
  metrale_kernel_t* k = register_kernel(ctx, "destroy_ctx", destroying_kernel, &p);
  MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
  assert_int_equal(p.destroy_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(p.destroy_message_ok);
  assert_int_equal(p.destroy_other, METRALE_OK);

  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  p.other_ctx = NULL;
  p.destroy_own = METRALE_OK;
  MT_OK(metrale_launch(ctx, k, one, one, 0, s, NULL));
  assert_int_equal(p.destroy_own, METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_synchronize(ctx, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  metrale_devptr_t q = 0;
  MT_OK(metrale_alloc(ctx, 64, &q));
  MT_OK(metrale_free(ctx, q));
  watchdog_disarm();
  mt_close(ctx);
}

/* A context with 64-byte red zones on the host backend (else the case is
 * skipped), under the watchdog. */
static metrale_context_t* open_padded_on_host(void) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  metrale_context_t* ctx = mt_open(&o);
  mt_require_host(ctx);
  watchdog_arm();
  return ctx;
}

/* A host kernel on stream `mine` that destroys `victim` while another
 * thread's red-zone scan waits for `mine` (a scan first queues a mark on
 * every stream, under a lock that the backend's destroys take too). */
typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t *mine, *victim;
  int running, scanned;
  metrale_status_t destroyed, scan;
} destroy_beside_scan_t;

static metrale_status_t destroying_beside_scan_kernel(const metrale_host_kernel_call_t* call,
                                                      void* user) {
  (void)call;
  destroy_beside_scan_t* p = user;
  __atomic_store_n(&p->running, 1, __ATOMIC_RELEASE);
  usleep(100 * 1000); /* the scan reaches this kernel's stream and waits */
  p->destroyed = metrale_stream_destroy(p->ctx, p->victim);
  /* 64 more deaths: the victim's backend object is due for its destroy
   * while the scan, which saw it live, has yet to queue its mark there. */
  for (int i = 0; i < 64 && p->destroyed == METRALE_OK; ++i) {
    metrale_stream_t* x = NULL;
    p->destroyed = metrale_stream_create(p->ctx, &x);
    if (p->destroyed == METRALE_OK) p->destroyed = metrale_stream_destroy(p->ctx, x);
  }
  return METRALE_OK;
}

static void* scan_while_kernel_runs(void* arg) {
  destroy_beside_scan_t* p = arg;
  if (!wait_for(&p->running, 1)) return NULL;
  size_t n = 0;
  p->scan = metrale_redzone_scan(p->ctx, NULL, 0, &n);
  __atomic_store_n(&p->scanned, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* The destroy never waits for the scan's lock: the scan waits for the
 * kernel, the kernel would wait for the scan. Both finish, with the pool on
 * or off (METRALE_POOL=0 runs the suite again), and no backend object dies
 * under the scan (the host backend aborts where the driver would be handed
 * a dead stream). The kernel's stream is created first: the scan reaches
 * it before the victim's. */
static void kernel_destroying_a_stream_beside_a_scan(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded_on_host();
  setenv("METRALE_HOST_DEAD_HANDLE_ABORT", "1", 1);
  destroy_beside_scan_t p = {0};
  p.ctx = ctx;
  p.destroyed = METRALE_ERROR_INTERNAL;
  p.scan = METRALE_ERROR_INTERNAL;
  MT_OK(metrale_stream_create(ctx, &p.mine));
  MT_OK(metrale_stream_create(ctx, &p.victim));
  metrale_devptr_t live = 0; /* a pad for the scan to read */
  MT_OK(metrale_alloc(ctx, 256, &live));
  metrale_kernel_t* k =
      register_kernel(ctx, "destroy_beside_scan", destroying_beside_scan_kernel, &p);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, scan_while_kernel_runs, &p), 0);
  MT_OK(metrale_launch(ctx, k, one, one, 0, p.mine, NULL));
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_int_equal(p.destroyed, METRALE_OK);
  assert_true(p.scanned);
  assert_int_equal(p.scan, METRALE_OK);
  MT_STATUS(metrale_stream_synchronize(ctx, p.victim), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_free(ctx, live));
  MT_OK(metrale_stream_destroy(ctx, p.mine));
  watchdog_disarm();
  mt_close(ctx);
  unsetenv("METRALE_HOST_DEAD_HANDLE_ABORT");
}

static metrale_status_t destroying_other_stream_kernel(const metrale_host_kernel_call_t* call,
                                                       void* user) {
  (void)call;
  kernel_probe_t* p = user;
  p->destroy_other = metrale_stream_destroy(p->ctx, p->other);
  return METRALE_OK;
}

/* With red zones on, a stream's retirement never runs beside a check of
 * freed pads; a host kernel's destroy may not wait for such a check (it
 * may be waiting for this kernel's stream), so it queues the retirement
 * and the mutex's holder, here the destroy itself, runs it. The blocks
 * freed on the stream go back, and the pool names no dead stream. */
static void kernel_destroying_another_stream_with_red_zones(void** state) {
  (void)state;
  metrale_context_t* ctx = open_padded_on_host();
  kernel_probe_t p = {0};
  p.ctx = ctx;
  MT_OK(metrale_stream_create(ctx, &p.other));
  metrale_devptr_t a = 0;
  MT_OK(metrale_alloc_async(ctx, 3000, p.other, &a));
  MT_OK(metrale_free_async(ctx, a, p.other)); /* waits for its pad check */
  metrale_kernel_t* k = register_kernel(ctx, "destroy_other", destroying_other_stream_kernel, &p);
  p.destroy_other = METRALE_ERROR_INTERNAL;
  MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
  assert_int_equal(p.destroy_other, METRALE_OK);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  metrale_pool_stats_t st = {.struct_size = sizeof st};
  MT_OK(metrale_pool_stats(ctx, &st));
  assert_int_equal(st.blocks_in_use, 0);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_alloc_async(ctx, 3000, s, &a));
  MT_OK(metrale_free_async(ctx, a, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_pool_trim(ctx, 0, NULL));
  watchdog_disarm();
  mt_close(ctx);
}

static metrale_status_t waiting_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  kernel_probe_t* p = user;
  p->sync_own = metrale_stream_synchronize(p->ctx, p->own);
  p->sync_message_ok = has(metrale_last_error_message(), "host kernel");
  p->sync_other = metrale_stream_synchronize(p->ctx, p->other);
  p->memset_async_own = metrale_memset_async(p->ctx, p->buf, 7, 64, p->own);
  /* The synchronous ones wait for their stream: the default one for memset. */
  p->memset_sync = metrale_memset(p->ctx, p->buf, 9, 64);
  uint8_t host[64];
  p->copy_d2h_own = metrale_copy_d2h_on_stream(p->ctx, p->buf, host, sizeof host, p->own);
  p->stream_destroy_own =
      p->own != NULL ? metrale_stream_destroy(p->ctx, p->own) : METRALE_ERROR_INVALID_ARGUMENT;
  metrale_devptr_t q = 0;
  p->alloc = metrale_alloc(p->ctx, 32, &q);
  if (p->alloc == METRALE_OK) p->alloc = metrale_free(p->ctx, q);
  size_t n = 0;
  p->live = metrale_live_count(p->ctx, &n);
  return METRALE_OK;
}

/* A host kernel that waits for its own stream gets INVALID_ARGUMENT before
 * anything is done; other streams, async work on its own stream, memory and
 * ledger calls work. */
static void kernel_waiting_for_own_stream_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  watchdog_arm();
  kernel_probe_t p = {0};
  p.ctx = ctx;
  MT_OK(metrale_alloc(ctx, 64, &p.buf));
  MT_OK(metrale_stream_create(ctx, &p.other));
  metrale_kernel_t* k = register_kernel(ctx, "wait_own", waiting_kernel, &p);

  /* On the default stream: memset (default stream) is a wait for it. */
  p.own = NULL;
  MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
  assert_int_equal(p.sync_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(p.sync_message_ok);
  assert_int_equal(p.sync_other, METRALE_OK);
  assert_int_equal(p.memset_async_own, METRALE_OK);
  assert_int_equal(p.memset_sync, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(p.copy_d2h_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(p.alloc, METRALE_OK);
  assert_int_equal(p.live, METRALE_OK);
  uint8_t* bytes = mt_read_device(ctx, p.buf, 64);
  assert_int_equal(bytes[0], 7); /* the refused memset did nothing */
  assert_int_equal(bytes[63], 7);
  free(bytes);

  /* On a created stream: memset (default stream) works, its stream is its own. */
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  p.own = s;
  MT_OK(metrale_launch(ctx, k, one, one, 0, s, NULL));
  assert_int_equal(p.sync_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(p.sync_other, METRALE_OK);
  assert_int_equal(p.memset_async_own, METRALE_OK);
  assert_int_equal(p.memset_sync, METRALE_OK);
  assert_int_equal(p.copy_d2h_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(p.stream_destroy_own, METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_synchronize(ctx, s)); /* still alive, and idle now */
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_stream_destroy(ctx, p.other));
  MT_OK(metrale_free(ctx, p.buf));
  watchdog_disarm();
  mt_close(ctx);
}

static metrale_status_t syncing_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  kernel_probe_t* p = user;
  p->sync_own = metrale_stream_synchronize(p->ctx, p->own);
  return METRALE_OK;
}

/* Replayed from a graph, a host kernel runs as work of the stream the graph
 * is launched on: that stream is its own, the capture's stream is not. */
static void kernel_replayed_by_graph_owns_the_launch_stream(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  watchdog_arm();
  kernel_probe_t p = {0};
  p.ctx = ctx;
  metrale_stream_t *capture = NULL, *replay = NULL;
  MT_OK(metrale_stream_create(ctx, &capture));
  MT_OK(metrale_stream_create(ctx, &replay));
  metrale_kernel_t* k = register_kernel(ctx, "sync_in_graph", syncing_kernel, &p);
  MT_OK(metrale_graph_begin_capture(ctx, capture));
  MT_OK(metrale_launch(ctx, k, one, one, 0, capture, NULL));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, capture, &g));
  p.own = replay;
  p.sync_own = METRALE_OK;
  MT_OK(metrale_graph_launch(ctx, g, replay));
  assert_int_equal(p.sync_own, METRALE_ERROR_INVALID_ARGUMENT);
  p.own = capture;
  p.sync_own = METRALE_ERROR_INTERNAL;
  MT_OK(metrale_graph_launch(ctx, g, replay));
  assert_int_equal(p.sync_own, METRALE_OK);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_stream_destroy(ctx, capture));
  MT_OK(metrale_stream_destroy(ctx, replay));
  watchdog_disarm();
  mt_close(ctx);
}

/* Two kernels on two streams, launched from two threads, both inside at once. */
typedef struct pair_probe {
  metrale_context_t* ctx;
  metrale_stream_t* streams[2];
  int arrived;
  int action; /* 0: scan, 1: synchronize the other stream, 2: memset_async on it */
  metrale_devptr_t buf;
  metrale_status_t status[2];
  char message[2][256];
  metrale_kernel_t* kernel;
} pair_probe_t;

typedef struct {
  pair_probe_t* pair;
  int index;
} pair_arg_t;

static pair_arg_t pair_args[2];

static metrale_status_t pair_kernel(const metrale_host_kernel_call_t* call, void* user) {
  pair_arg_t* a = *(pair_arg_t**)call->params[0];
  (void)user;
  pair_probe_t* p = a->pair;
  __atomic_add_fetch(&p->arrived, 1, __ATOMIC_ACQ_REL);
  if (!wait_for(&p->arrived, 2)) return METRALE_ERROR_INTERNAL; /* never both inside */
  metrale_stream_t* other = p->streams[1 - a->index];
  metrale_status_t st = METRALE_ERROR_INTERNAL;
  if (p->action == 0) {
    metrale_redzone_violation_t v[4];
    size_t n = 0;
    st = metrale_redzone_scan(p->ctx, v, 4, &n);
  } else if (p->action == 1) {
    st = metrale_stream_synchronize(p->ctx, other);
  } else {
    st = metrale_memset_async(p->ctx, p->buf, 1, 64, other);
  }
  p->status[a->index] = st;
  snprintf(p->message[a->index], sizeof p->message[0], "%s", metrale_last_error_message());
  return METRALE_OK;
}

static void* pair_launcher(void* arg) {
  pair_arg_t* a = arg;
  pair_probe_t* p = a->pair;
  void* params[] = {&a};
  return (void*)(intptr_t)metrale_launch(p->ctx, p->kernel, one, one, 0,
                                         p->streams[a->index], params);
}

static void run_pair(pair_probe_t* p) {
  p->arrived = 0;
  p->status[0] = p->status[1] = METRALE_ERROR_INTERNAL;
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) {
    pair_args[i].pair = p;
    pair_args[i].index = i;
    assert_int_equal(pthread_create(&t[i], NULL, pair_launcher, &pair_args[i]), 0);
  }
  for (int i = 0; i < 2; ++i) {
    void* rc = NULL;
    pthread_join(t[i], &rc);
    assert_int_equal((int)(intptr_t)rc, METRALE_OK);
  }
}

static pair_probe_t* open_pair(int action) {
  static pair_probe_t p;
  memset(&p, 0, sizeof p);
  metrale_context_options_t opts = mt_options();
  opts.redzone_bytes = 32;
  p.ctx = mt_open(&opts);
  mt_require_host(p.ctx);
  p.action = action;
  MT_OK(metrale_alloc(p.ctx, 64, &p.buf));
  for (int i = 0; i < 2; ++i) MT_OK(metrale_stream_create(p.ctx, &p.streams[i]));
  const size_t sizes[] = {sizeof(void*)};
  MT_OK(metrale_module_register_host_params(p.ctx, "reentry", "pair", pair_kernel, NULL, sizes,
                                            1));
  MT_OK(metrale_kernel_get(p.ctx, "reentry", "pair", &p.kernel));
  return &p;
}

static void close_pair(pair_probe_t* p) {
  for (int i = 0; i < 2; ++i) MT_OK(metrale_stream_destroy(p->ctx, p->streams[i]));
  MT_OK(metrale_free(p->ctx, p->buf));
  mt_close(p->ctx);
}

/* Two host kernels that each scan: a scan waits for every stream, the
 * kernel's own included, so both are refused; neither deadlocks. */
static void two_kernels_scanning_do_not_deadlock(void** state) {
  (void)state;
  pair_probe_t* p = open_pair(0);
  watchdog_arm();
  run_pair(p);
  for (int i = 0; i < 2; ++i) {
    assert_int_equal(p->status[i], METRALE_ERROR_INVALID_ARGUMENT);
    assert_true(has(p->message[i], "host kernel"));
  }
  metrale_redzone_violation_t v[4];
  size_t n = 0;
  MT_OK(metrale_redzone_scan(p->ctx, v, 4, &n)); /* from outside it works */
  watchdog_disarm();
  close_pair(p);
}

/* Two host kernels that each wait for (or put work on) the other's stream:
 * the one whose wait would close the cycle gets INVALID_ARGUMENT, the other
 * completes once it returned. Repeated: which one loses is a race. The
 * refused call did nothing (rule 1): a refused synchronize is not counted
 * in stream_syncs. */
static void two_kernels_waiting_for_each_other_do_not_deadlock(void** state) {
  (void)state;
  for (int action = 1; action <= 2; ++action) {
    pair_probe_t* p = open_pair(action);
    watchdog_arm();
    MT_OK(metrale_counters_reset(p->ctx));
    for (int round = 0; round < 5; ++round) {
      run_pair(p);
      const int ok = (p->status[0] == METRALE_OK) + (p->status[1] == METRALE_OK);
      const int refused = (p->status[0] == METRALE_ERROR_INVALID_ARGUMENT) +
                          (p->status[1] == METRALE_ERROR_INVALID_ARGUMENT);
      if (ok != 1 || refused != 1) {
        fail_msg("action %d: statuses %s / %s (%s | %s)", action,
                 metrale_status_name(p->status[0]), metrale_status_name(p->status[1]),
                 p->message[0], p->message[1]);
      }
      const int loser = p->status[0] == METRALE_OK ? 1 : 0;
      assert_true(has(p->message[loser], "deadlock"));
    }
    /* One synchronize per round returned OK (action 1), none else waited. */
    assert_int_equal(mt_counters(p->ctx).stream_syncs, action == 1 ? 5 : 0);
    watchdog_disarm();
    close_pair(p);
  }
}

/* The log callback runs inside a host kernel: the kernel's rules hold there
 * too (its own stream may not be waited for; other calls work). */
typedef struct {
  metrale_context_t* ctx;
  metrale_context_t* noisy; /* where the kernel leaks and sweeps, for a warning */
  metrale_stream_t* own;
  metrale_devptr_t buf;
  int calls;
  metrale_status_t sync_own, memset_async_own;
} cb_in_kernel_t;

static cb_in_kernel_t cik;

static void log_in_kernel(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  (void)message;
  cb_in_kernel_t* c = user;
  if (c->calls++ > 0) return;
  c->sync_own = metrale_stream_synchronize(c->ctx, c->own);
  c->memset_async_own = metrale_memset_async(c->ctx, c->buf, 5, 16, c->own);
}

static metrale_status_t logging_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  return leak_and_sweep(((cb_in_kernel_t*)user)->noisy);
}

static void callback_inside_kernel_follows_kernel_rules(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  watchdog_arm();
  memset(&cik, 0, sizeof cik);
  cik.ctx = ctx;
  cik.noisy = mt_open(NULL);
  MT_OK(metrale_stream_create(ctx, &cik.own));
  MT_OK(metrale_alloc(ctx, 16, &cik.buf));
  metrale_kernel_t* k = register_kernel(ctx, "logging", logging_kernel, &cik);
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(log_in_kernel, &cik));
  MT_OK(metrale_launch(ctx, k, one, one, 0, cik.own, NULL));
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_true(cik.calls >= 1);
  assert_int_equal(cik.sync_own, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(cik.memset_async_own, METRALE_OK);
  MT_OK(metrale_stream_destroy(ctx, cik.own));
  MT_OK(metrale_free(ctx, cik.buf));
  watchdog_disarm();
  mt_close(cik.noisy);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(callback_calls_library_that_logs, teardown),
      cmocka_unit_test_teardown(set_callback_waits_for_running_call, teardown),
      cmocka_unit_test_teardown(set_callback_from_inside_is_refused, teardown),
      cmocka_unit_test_teardown(kernel_destroying_own_context_is_refused, teardown),
      cmocka_unit_test_teardown(kernel_waiting_for_own_stream_is_refused, teardown),
      cmocka_unit_test_teardown(kernel_destroying_another_stream_with_red_zones, teardown),
      cmocka_unit_test_teardown(kernel_destroying_a_stream_beside_a_scan, teardown),
      cmocka_unit_test_teardown(kernel_replayed_by_graph_owns_the_launch_stream, teardown),
      cmocka_unit_test_teardown(two_kernels_scanning_do_not_deadlock, teardown),
      cmocka_unit_test_teardown(two_kernels_waiting_for_each_other_do_not_deadlock, teardown),
      cmocka_unit_test_teardown(callback_inside_kernel_follows_kernel_rules, teardown),
  };
  return MT_RUN(tests);
}
