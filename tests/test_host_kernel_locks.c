/* Host kernels (host backend) that call into the library while another
 * thread holds a lock of the library's own: the pool's lock, held by a free
 * whose event record or capture query names the kernel's stream, must
 * never wait for that stream (the kernel may be waiting for the pool), and
 * metrale_log_set_callback from a kernel is refused (it would wait for
 * callbacks that may wait for the kernel's stream); an event recorded
 * behind kernels on two streams completes with its latest record, and a
 * stream waiting for a record behind a kernel waits for the kernel; pool
 * calls inside a wait cycle through two kernels keep memory safe and answer
 * for themselves. Every case runs under
 * a watchdog: a deadlock fails it instead of hanging the suite. */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test_support.h"

static void on_alarm(int sig) {
  (void)sig;
  static const char msg[] =
      "\n[  FAILED  ] watchdog: a case did not finish in time (a deadlock?)\n";
  (void)!write(2, msg, sizeof msg - 1);
  _exit(1);
}

static const metrale_dim3_t one = {1, 1, 1};

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s2;
  int marked; /* 1: record_stream on s2 and metrale_free; 0: free_async on s2 */
  atomic_int kernel_in, free_go;
  metrale_status_t kernel_alloc, kernel_free, freed, marked_status;
  metrale_status_t set_callback;
  int set_callback_message_ok;
} probe_t;

/* On s2: lets the other thread free, waits long enough for its free to hold
 * the pool's lock on its way to s2, then allocates (takes the pool's lock). */
static metrale_status_t allocating_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  probe_t* p = user;
  atomic_store(&p->kernel_in, 1);
  while (!atomic_load(&p->free_go)) usleep(100);
  usleep(150 * 1000);
  metrale_devptr_t q = 0;
  p->kernel_alloc = metrale_alloc(p->ctx, 64, &q);
  if (p->kernel_alloc == METRALE_OK) p->kernel_free = metrale_free(p->ctx, q);
  return METRALE_OK;
}

static void* freeing_thread(void* arg) {
  probe_t* p = arg;
  metrale_devptr_t b = 0;
  if (metrale_alloc(p->ctx, 1024, &b) != METRALE_OK) return NULL;
  while (!atomic_load(&p->kernel_in)) usleep(100);
  atomic_store(&p->free_go, 1);
  if (p->marked) {
    p->marked_status = metrale_record_stream(p->ctx, b, p->s2);
    p->freed = metrale_free(p->ctx, b);
  } else {
    p->freed = metrale_free_async(p->ctx, b, p->s2);
  }
  return NULL;
}

static void free_naming_a_busy_stream_never_waits_for_it(void** state) {
  (void)state;
  signal(SIGALRM, on_alarm);
  for (int marked = 0; marked <= 1; ++marked) {
    metrale_context_t* ctx = mt_open(NULL);
    mt_require_host(ctx);
    alarm(30);
    probe_t p = {0};
    p.ctx = ctx;
    p.marked = marked;
    MT_OK(metrale_stream_create(ctx, &p.s2));
    MT_OK(metrale_module_register_host(ctx, "locks", "alloc", allocating_kernel, &p));
    metrale_kernel_t* k = NULL;
    MT_OK(metrale_kernel_get(ctx, "locks", "alloc", &k));
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, freeing_thread, &p), 0);
    MT_OK(metrale_launch(ctx, k, one, one, 0, p.s2, NULL)); /* runs here, now */
    assert_int_equal(pthread_join(t, NULL), 0);
    alarm(0);
    MT_OK(p.kernel_alloc);
    MT_OK(p.kernel_free);
    MT_OK(p.marked_status);
    MT_OK(p.freed);
    assert_int_equal(mt_ledger(ctx).count, 0);
    const metrale_counters_t c = mt_counters(ctx);
    assert_int_equal(c.allocs, c.frees);
    MT_OK(metrale_stream_synchronize(ctx, p.s2));
    MT_OK(metrale_stream_destroy(ctx, p.s2));
    mt_close(ctx);
  }
}

static metrale_status_t setting_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  probe_t* p = user;
  p->set_callback = metrale_log_set_callback(NULL, NULL);
  p->set_callback_message_ok = strstr(metrale_last_error_message(), "host kernel") != NULL;
  return METRALE_OK;
}

static void set_callback_from_a_host_kernel_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  probe_t p = {0};
  MT_OK(metrale_module_register_host(ctx, "locks", "set", setting_kernel, &p));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "locks", "set", &k));
  MT_OK(metrale_launch(ctx, k, one, one, 0, NULL, NULL));
  assert_int_equal(p.set_callback, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(p.set_callback_message_ok);
  /* Outside the kernel it works as before. */
  MT_OK(metrale_log_set_callback(NULL, NULL));
  mt_close(ctx);
}

/* A host kernel that holds its stream until told to return. */
typedef struct {
  atomic_int in, go;
} gate_t;

static metrale_status_t held_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  gate_t* g = user;
  atomic_store(&g->in, 1);
  while (!atomic_load(&g->go)) usleep(100);
  return METRALE_OK;
}

typedef struct {
  metrale_context_t* ctx;
  metrale_kernel_t* k;
  metrale_stream_t* s;
  metrale_status_t launched;
} launch_job_t;

static void* launching_thread(void* arg) {
  launch_job_t* j = arg;
  j->launched = metrale_launch(j->ctx, j->k, one, one, 0, j->s, NULL);
  return NULL;
}

static int query(metrale_context_t* ctx, metrale_event_t* e) {
  int done = -1;
  MT_OK(metrale_event_query(ctx, e, &done));
  return done;
}

/* A context on the host backend under the watchdog. */
static metrale_context_t* open_watched(void) {
  signal(SIGALRM, on_alarm);
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  alarm(30);
  return ctx;
}

/* Registers fn as locks::name and gives the job its kernel and a stream. */
static void prepare_job(launch_job_t* j, metrale_context_t* ctx, const char* name,
                        metrale_host_kernel_fn fn, void* user) {
  j->ctx = ctx;
  MT_OK(metrale_module_register_host(ctx, "locks", name, fn, user));
  MT_OK(metrale_kernel_get(ctx, "locks", name, &j->k));
  MT_OK(metrale_stream_create(ctx, &j->s));
}

/* Launches the job on a thread of its own; returns once *in is set. */
static pthread_t start_job(launch_job_t* j, atomic_int* in) {
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, launching_thread, j), 0);
  while (!atomic_load(in)) usleep(100);
  return t;
}

/* An event recorded behind a kernel on stream A, then again behind one on
 * stream B: A's record, stamped when A's kernel returns, is not the
 * event's latest, so the event stays pending until B's kernel returns. */
static void an_earlier_records_late_stamp_never_completes_a_later_record(void** state) {
  (void)state;
  metrale_context_t* ctx = open_watched();
  gate_t ga = {0}, gb = {0};
  launch_job_t ja, jb;
  prepare_job(&ja, ctx, "hold_a", held_kernel, &ga);
  prepare_job(&jb, ctx, "hold_b", held_kernel, &gb);
  metrale_event_t* e = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &e));

  const pthread_t ta = start_job(&ja, &ga.in);
  MT_OK(metrale_event_record(ctx, e, ja.s));
  assert_int_equal(query(ctx, e), 0);
  const pthread_t tb = start_job(&jb, &gb.in);
  MT_OK(metrale_event_record(ctx, e, jb.s));

  atomic_store(&ga.go, 1);
  assert_int_equal(pthread_join(ta, NULL), 0);
  MT_OK(ja.launched);
  assert_int_equal(query(ctx, e), 0); /* B's record is still behind B's kernel */

  atomic_store(&gb.go, 1);
  assert_int_equal(pthread_join(tb, NULL), 0);
  MT_OK(jb.launched);
  assert_int_equal(query(ctx, e), 1);
  MT_OK(metrale_event_synchronize(ctx, e));
  alarm(0);
  MT_OK(metrale_event_destroy(ctx, e));
  MT_OK(metrale_stream_destroy(ctx, ja.s));
  MT_OK(metrale_stream_destroy(ctx, jb.s));
  mt_close(ctx);
}

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s;
  metrale_event_t* e;
  metrale_status_t waited;
  atomic_int done;
} waiter_t;

static void* waiting_thread(void* arg) {
  waiter_t* w = arg;
  w->waited = metrale_stream_wait_event(w->ctx, w->s, w->e);
  atomic_store(&w->done, 1);
  return NULL;
}

/* Host work runs when it is called, so a stream waiting for an event whose
 * record sits behind a kernel on another stream is its caller waiting, until
 * that kernel returns; on the record's own stream nothing is waited for. */
static void a_stream_waits_for_a_record_behind_a_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = open_watched();
  gate_t ga = {0};
  launch_job_t ja;
  prepare_job(&ja, ctx, "hold_a", held_kernel, &ga);
  waiter_t w = {.ctx = ctx};
  MT_OK(metrale_stream_create(ctx, &w.s));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DISABLE_TIMING, &w.e));

  const pthread_t ta = start_job(&ja, &ga.in);
  pthread_t tw;
  MT_OK(metrale_event_record(ctx, w.e, ja.s));
  MT_OK(metrale_stream_wait_event(ctx, ja.s, w.e)); /* its own stream: at once */
  assert_int_equal(pthread_create(&tw, NULL, waiting_thread, &w), 0);
  usleep(50 * 1000);
  assert_int_equal(atomic_load(&w.done), 0); /* still behind the kernel */
  atomic_store(&ga.go, 1);
  assert_int_equal(pthread_join(ta, NULL), 0);
  assert_int_equal(pthread_join(tw, NULL), 0);
  alarm(0);
  MT_OK(ja.launched);
  MT_OK(w.waited);
  assert_int_equal(query(ctx, w.e), 1);
  MT_OK(metrale_event_destroy(ctx, w.e));
  MT_OK(metrale_stream_destroy(ctx, ja.s));
  MT_OK(metrale_stream_destroy(ctx, w.s));
  mt_close(ctx);
}

typedef struct {
  waiter_t w;
  atomic_int in, recorded;
  int message_ok;
} self_wait_t;

/* Waits, from its own stream's kernel, for a record another thread left
 * behind it: it would wait for itself. */
static metrale_status_t self_waiting_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  self_wait_t* p = user;
  atomic_store(&p->in, 1);
  while (!atomic_load(&p->recorded)) usleep(100);
  p->w.waited = metrale_stream_wait_event(p->w.ctx, p->w.s, p->w.e);
  p->message_ok = strstr(metrale_last_error_message(), "host kernel") != NULL;
  return METRALE_OK;
}

static void a_kernel_waiting_for_a_record_behind_itself_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = open_watched();
  self_wait_t p = {.w = {.ctx = ctx}};
  launch_job_t j;
  prepare_job(&j, ctx, "self_wait", self_waiting_kernel, &p);
  MT_OK(metrale_stream_create(ctx, &p.w.s));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DISABLE_TIMING, &p.w.e));
  const pthread_t t = start_job(&j, &p.in);
  MT_OK(metrale_event_record(ctx, p.w.e, j.s));
  atomic_store(&p.recorded, 1);
  assert_int_equal(pthread_join(t, NULL), 0);
  alarm(0);
  MT_OK(j.launched);
  assert_int_equal(p.w.waited, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(p.message_ok);
  assert_int_equal(query(ctx, p.w.e), 1); /* stamped as the kernel returned */
  MT_OK(metrale_event_destroy(ctx, p.w.e));
  MT_OK(metrale_stream_destroy(ctx, j.s));
  MT_OK(metrale_stream_destroy(ctx, p.w.s));
  mt_close(ctx);
}

typedef struct {
  gate_t gate;
  metrale_context_t* ctx;
  int oom; /* 0: metrale_pool_trim; 1: an allocation past any memory (its retry releases the cache) */
  metrale_status_t alloc, trim;
  size_t released;
} trim_race_t;

/* Allocates once told to: by then a trim on another thread waits for this
 * kernel's stream. */
static metrale_status_t allocating_when_told(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  trim_race_t* r = user;
  atomic_store(&r->gate.in, 1);
  while (!atomic_load(&r->gate.go)) usleep(100);
  metrale_devptr_t p = 0;
  r->alloc = metrale_alloc(r->ctx, 64, &p);
  if (r->alloc == METRALE_OK) r->alloc = metrale_free(r->ctx, p);
  return METRALE_OK;
}

static void* trimming_thread(void* arg) {
  trim_race_t* r = arg;
  if (r->oom) {
    metrale_devptr_t p = 0;
    r->trim = metrale_alloc(r->ctx, (size_t)1 << 50, &p);
    if (r->trim == METRALE_ERROR_OUT_OF_MEMORY) r->trim = METRALE_OK;
  } else {
    r->trim = metrale_pool_trim(r->ctx, 0, &r->released);
  }
  return NULL;
}

/* metrale_pool_trim (or the out-of-memory retry of an allocation) waits
 * for the frees on a stream whose host kernel runs on another thread, and
 * that kernel allocates meanwhile: the wait is made without the pool's
 * lock, so both complete. */
static void a_trim_waiting_for_a_kernel_that_allocates_never_deadlocks(void** state) {
  (void)state;
  for (int oom = 0; oom <= 1; ++oom) {
    metrale_context_t* ctx = open_watched();
    if (!mt_pool_on(ctx)) {
      mt_close(ctx);
      skip();
    }
    trim_race_t r = {.ctx = ctx, .oom = oom};
    launch_job_t j;
    prepare_job(&j, ctx, "alloc_when_told", allocating_when_told, &r);
    const pthread_t tk = start_job(&j, &r.gate.in);
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc_async(ctx, 4096, j.s, &p)); /* nested behind the kernel */
    MT_OK(metrale_free_async(ctx, p, j.s));
    pthread_t tt;
    assert_int_equal(pthread_create(&tt, NULL, trimming_thread, &r), 0);
    usleep(100 * 1000); /* the trim is waiting for the kernel's stream by now */
    atomic_store(&r.gate.go, 1);
    assert_int_equal(pthread_join(tk, NULL), 0);
    assert_int_equal(pthread_join(tt, NULL), 0);
    alarm(0);
    MT_OK(j.launched);
    MT_OK(r.alloc);
    MT_OK(r.trim);
    /* The trim waited for the free behind the kernel: its chunk went back. */
    if (!oom) assert_true(r.released > 0);
    MT_OK(metrale_stream_destroy(ctx, j.s));
    mt_close(ctx);
  }
}

/* A wait cycle through two host kernels: KS on S waits for T (a
 * synchronize) while KT on T calls the pool. S has a free no event covers
 * yet (its block W, freed behind KS while KS still writes it). */
enum { CYCLE_BYTES = 65536 };

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t *s, *t;
  metrale_devptr_t w, n;
  int what; /* 0: KT destroys S, then allocates; 1: an allocation past any memory, then a trim */
  atomic_int ks_in, ks_waiting;
  metrale_status_t sync, first, second;
} cycle_t;

static metrale_status_t cycle_ks(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  cycle_t* c = user;
  atomic_store(&c->ks_in, 1);
  usleep(50 * 1000); /* W is freed behind this kernel now */
  atomic_store(&c->ks_waiting, 1);
  c->sync = metrale_stream_synchronize(c->ctx, c->t); /* waits for KT */
  memset((void*)(uintptr_t)c->w, 0xAB, CYCLE_BYTES);   /* still W's user: host memory */
  return METRALE_OK;
}

static metrale_status_t cycle_kt(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  cycle_t* c = user;
  while (!atomic_load(&c->ks_waiting)) usleep(100);
  usleep(100 * 1000); /* KS is blocked in its synchronize */
  if (c->what == 0) {
    c->first = metrale_stream_destroy(c->ctx, c->s);
    c->second = metrale_alloc(c->ctx, CYCLE_BYTES, &c->n);
    if (c->second == METRALE_OK) memset((void*)(uintptr_t)c->n, 0x11, CYCLE_BYTES);
  } else {
    metrale_devptr_t p = 0;
    c->first = metrale_alloc(c->ctx, (size_t)1 << 50, &p);
    size_t released = 0;
    c->second = metrale_pool_trim(c->ctx, 0, &released);
  }
  return METRALE_OK;
}

static void* cycle_launch(void* arg) {
  launch_job_t* j = arg;
  j->launched = metrale_launch(j->ctx, j->k, one, one, 0, j->s, NULL);
  return NULL;
}

/* The pool's waits for S inside that cycle are refused by the backend. A
 * destroy of S from KT succeeds, but S's blocks stay ordered on S until its
 * work is done (W is not handed out while KS writes it: rule 9); the
 * retirement is finished by a later call. An allocation past any memory
 * and a trim from KT get their own answers (OUT_OF_MEMORY, OK), not the
 * refusal of a wait they never asked for. */
static void pool_calls_inside_a_wait_cycle(void** state) {
  (void)state;
  for (int what = 0; what <= 1; ++what) {
    metrale_context_t* ctx = open_watched();
    if (!mt_pool_on(ctx)) {
      mt_close(ctx);
      skip();
    }
    cycle_t c = {.ctx = ctx, .what = what};
    launch_job_t js = {.ctx = ctx}, jt = {.ctx = ctx};
    MT_OK(metrale_module_register_host(ctx, "locks", "cycle_ks", cycle_ks, &c));
    MT_OK(metrale_module_register_host(ctx, "locks", "cycle_kt", cycle_kt, &c));
    MT_OK(metrale_kernel_get(ctx, "locks", "cycle_ks", &js.k));
    MT_OK(metrale_kernel_get(ctx, "locks", "cycle_kt", &jt.k));
    MT_OK(metrale_stream_create(ctx, &c.s));
    MT_OK(metrale_stream_create(ctx, &c.t));
    js.s = c.s;
    jt.s = c.t;
    MT_OK(metrale_alloc_async(ctx, CYCLE_BYTES, c.s, &c.w));
    pthread_t ts, tt;
    assert_int_equal(pthread_create(&ts, NULL, cycle_launch, &js), 0);
    while (!atomic_load(&c.ks_in)) usleep(100);
    MT_OK(metrale_free_async(ctx, c.w, c.s)); /* behind KS, which still uses W */
    assert_int_equal(pthread_create(&tt, NULL, cycle_launch, &jt), 0);
    assert_int_equal(pthread_join(tt, NULL), 0);
    assert_int_equal(pthread_join(ts, NULL), 0);
    alarm(0);
    MT_OK(js.launched);
    MT_OK(jt.launched);
    MT_OK(c.sync);
    if (what == 0) {
      MT_OK(c.first);
      MT_OK(c.second);
      assert_true(c.n != c.w);
      const unsigned char* n = (const unsigned char*)(uintptr_t)c.n;
      for (size_t i = 0; i < CYCLE_BYTES; ++i)
        if (n[i] != 0x11) fail_msg("byte %zu of the new block was overwritten by S's kernel", i);
      MT_OK(metrale_free(ctx, c.n));
    } else {
      MT_STATUS(c.first, METRALE_ERROR_OUT_OF_MEMORY);
      MT_OK(c.second);
      MT_OK(metrale_stream_destroy(ctx, c.s));
    }
    /* The put-off retirement is finished by now (the trim drains it): every
     * chunk goes back. */
    size_t released = 0;
    MT_OK(metrale_pool_trim(ctx, 0, &released));
    metrale_pool_stats_t st = {.struct_size = sizeof st};
    MT_OK(metrale_pool_stats(ctx, &st));
    assert_int_equal(st.in_use_bytes, 0);
    assert_int_equal(st.reserved_bytes, 0);
    MT_OK(metrale_stream_destroy(ctx, c.t));
    mt_close(ctx);
  }
}

typedef struct {
  metrale_context_t* ctx;
  metrale_stream_t* s;
  metrale_devptr_t p;
  atomic_int started, done;
  metrale_status_t freed;
} pad_free_t;

static void* freeing_into_a_busy_stream(void* arg) {
  pad_free_t* f = arg;
  atomic_store(&f->started, 1);
  f->freed = metrale_free_async(f->ctx, f->p, f->s); /* its check waits for f->s */
  atomic_store(&f->done, 1);
  return NULL;
}

/* METRALE_REDZONE_VERIFY_BATCH=1: a free made while another thread's check
 * of freed pads runs (it waits for a stream whose host kernel still runs)
 * is not checked by its own call; the running check takes it before it
 * ends, so once every thread is done nothing is pending and its overrun is
 * logged and counted. */
static void a_free_during_another_threads_pad_check_is_checked(void** state) {
  (void)state;
  signal(SIGALRM, on_alarm);
  setenv("METRALE_REDZONE_VERIFY_BATCH", "1", 1);
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  metrale_context_t* ctx = mt_open(&o);
  unsetenv("METRALE_REDZONE_VERIFY_BATCH");
  mt_require_host(ctx);
  if (!mt_pool_on(ctx)) {
    mt_close(ctx);
    skip();
  }
  alarm(30);
  gate_t g = {0};
  launch_job_t j;
  prepare_job(&j, ctx, "hold_pads", held_kernel, &g);
  pad_free_t f = {.ctx = ctx, .s = j.s};
  MT_OK(metrale_alloc_async(ctx, 1000, j.s, &f.p));
  MT_OK(metrale_stream_synchronize(ctx, j.s));
  const pthread_t tk = start_job(&j, &g.in);
  pthread_t tf;
  assert_int_equal(pthread_create(&tf, NULL, freeing_into_a_busy_stream, &f), 0);
  while (!atomic_load(&f.started)) usleep(100);
  usleep(300 * 1000); /* its check waits for the kernel's stream by now */
  assert_int_equal(atomic_load(&f.done), 0);
  metrale_devptr_t b = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "pad_alloc.c", 1, &b));
  const unsigned char junk = 0x5a;
  MT_OK(metrale_copy_h2d(ctx, &junk, 1, b + 1000));
  mt_keep_errors();
  MT_OK(metrale_free_at(ctx, b, "pad_free.c", 2)); /* finds the check running */
  atomic_store(&g.go, 1);
  assert_int_equal(pthread_join(tk, NULL), 0);
  assert_int_equal(pthread_join(tf, NULL), 0);
  mt_stop_keeping_errors();
  alarm(0);
  MT_OK(j.launched);
  MT_OK(f.freed);
  metrale_pool_stats_t st = {.struct_size = sizeof st};
  MT_OK(metrale_pool_stats(ctx, &st));
  assert_int_equal(st.pads_pending, 0);
  assert_int_equal(st.pads_checked, 2);
  assert_int_equal(st.pads_overwritten, 1);
  assert_non_null(strstr(mt_errors(), "freed at pad_free.c:2"));
  MT_OK(metrale_stream_destroy(ctx, j.s));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(free_naming_a_busy_stream_never_waits_for_it),
      cmocka_unit_test(set_callback_from_a_host_kernel_is_refused),
      cmocka_unit_test(an_earlier_records_late_stamp_never_completes_a_later_record),
      cmocka_unit_test(a_stream_waits_for_a_record_behind_a_kernel),
      cmocka_unit_test(a_kernel_waiting_for_a_record_behind_itself_is_refused),
      cmocka_unit_test(a_trim_waiting_for_a_kernel_that_allocates_never_deadlocks),
      cmocka_unit_test(pool_calls_inside_a_wait_cycle),
      cmocka_unit_test(a_free_during_another_threads_pad_check_is_checked),
  };
  return MT_RUN(tests);
}
