/* The log callback receives lines with levels; set_level filters; a NULL
 * callback restores stderr. A sweep of leftover allocations is the library's
 * documented warning, so it is the line these cases provoke. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

typedef struct {
  pthread_mutex_t lock;
  int lines;
  int warn_naming_site;
  int bad_level;
  int newline_seen;
} capture_t;

static capture_t cap = {PTHREAD_MUTEX_INITIALIZER, 0, 0, 0, 0};

static void on_log(metrale_log_level_t level, const char* message, void* user) {
  capture_t* c = user;
  pthread_mutex_lock(&c->lock);
  c->lines++;
  if (level < METRALE_LOG_TRACE || level > METRALE_LOG_CRITICAL) c->bad_level++;
  size_t len = message ? strlen(message) : 0;
  if (message == NULL || (len > 0 && message[len - 1] == '\n')) c->newline_seen++;
  if (message != NULL && level == METRALE_LOG_WARN && strstr(message, "leaky_site.c") != NULL)
    c->warn_naming_site++;
  pthread_mutex_unlock(&c->lock);
}

static void reset_capture(void) {
  pthread_mutex_lock(&cap.lock);
  cap.lines = cap.warn_naming_site = cap.bad_level = cap.newline_seen = 0;
  pthread_mutex_unlock(&cap.lock);
}

static void leak_and_sweep(metrale_context_t* ctx) {
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 4096, "leaky_site.c", 77, &p));
  size_t n = 0;
  MT_OK(metrale_sweep_unreleased(ctx, &n));
  assert_int_equal(n, 1);
}

static int teardown(void** state) {
  (void)state;
  metrale_log_set_callback(NULL, NULL);
  metrale_log_set_level(METRALE_LOG_INFO);
  return 0;
}

static void callback_receives_warnings(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  reset_capture();
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(on_log, &cap));
  leak_and_sweep(ctx);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_true(cap.warn_naming_site >= 1);
  assert_int_equal(cap.bad_level, 0);
  assert_int_equal(cap.newline_seen, 0); /* text comes without newline */
  mt_close(ctx);
}

static void set_level_filters(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  reset_capture();
  MT_OK(metrale_log_set_callback(on_log, &cap));
  MT_OK(metrale_log_set_level(METRALE_LOG_ERROR));
  leak_and_sweep(ctx);
  assert_int_equal(cap.warn_naming_site, 0);
  MT_OK(metrale_log_set_level(METRALE_LOG_OFF));
  leak_and_sweep(ctx);
  assert_int_equal(cap.lines, 0);
  MT_OK(metrale_log_set_level(METRALE_LOG_TRACE));
  leak_and_sweep(ctx);
  assert_true(cap.warn_naming_site >= 1);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  mt_close(ctx);
}

static int quiet_lines = 0;
static void count_below_warn(metrale_log_level_t level, const char* message, void* user) {
  (void)message;
  (void)user;
  if (level < METRALE_LOG_WARN) __atomic_add_fetch(&quiet_lines, 1, __ATOMIC_RELAXED);
}

static void level_warn_hides_info(void** state) {
  (void)state;
  quiet_lines = 0;
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(count_below_warn, NULL));
  metrale_context_t* ctx = mt_open(NULL); /* creation logs at info or debug, if at all */
  leak_and_sweep(ctx);
  mt_close(ctx);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_int_equal(quiet_lines, 0);
}

static void null_callback_restores_stderr(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  reset_capture();
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(on_log, &cap));
  MT_OK(metrale_log_set_callback(NULL, NULL));
  leak_and_sweep(ctx); /* goes to stderr now */
  assert_int_equal(cap.lines, 0);
  mt_close(ctx);
}

static void invalid_level_is_refused(void** state) {
  (void)state;
  MT_STATUS(metrale_log_set_level((metrale_log_level_t)7), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_log_set_level((metrale_log_level_t)-1), METRALE_ERROR_INVALID_ARGUMENT);
  for (int l = METRALE_LOG_TRACE; l <= METRALE_LOG_OFF; ++l)
    MT_OK(metrale_log_set_level((metrale_log_level_t)l));
}

/* Each thread allocates and frees on the shared context, then leaks one
 * buffer on a context of its own and sweeps it: the sweep's warning is
 * logged in that thread. A barrier makes the threads log at the same time. */
enum { LOG_THREADS = 4 };

typedef struct {
  pthread_mutex_t lock;
  pthread_t ids[LOG_THREADS + 4];
  int n; /* distinct threads that logged a sweep warning */
} thread_ids_t;

static thread_ids_t warned_from = {PTHREAD_MUTEX_INITIALIZER, {0}, 0};

static void on_log_with_thread(metrale_log_level_t level, const char* message, void* user) {
  on_log(level, message, user);
  if (message == NULL || level != METRALE_LOG_WARN || strstr(message, "leaky_site.c") == NULL)
    return;
  pthread_t self = pthread_self();
  pthread_mutex_lock(&warned_from.lock);
  int known = 0;
  for (int i = 0; i < warned_from.n; ++i) known |= pthread_equal(warned_from.ids[i], self);
  if (!known && warned_from.n < (int)(sizeof warned_from.ids / sizeof warned_from.ids[0]))
    warned_from.ids[warned_from.n++] = self;
  pthread_mutex_unlock(&warned_from.lock);
}

typedef struct {
  metrale_context_t* shared;
  metrale_context_t* own;
  pthread_barrier_t* start;
} log_thread_arg_t;

static void* log_on_thread(void* p) {
  log_thread_arg_t* a = p;
  pthread_barrier_wait(a->start);
  for (int i = 0; i < 20; ++i) {
    metrale_devptr_t d = 0;
    if (metrale_alloc_at(a->shared, 64, "leaky_site.c", 1, &d) != METRALE_OK) return (void*)1;
    if (metrale_free(a->shared, d) != METRALE_OK) return (void*)1;
  }
  metrale_devptr_t leak = 0;
  if (metrale_alloc_at(a->own, 128, "leaky_site.c", 2, &leak) != METRALE_OK) return (void*)1;
  size_t n = 0;
  if (metrale_sweep_unreleased(a->own, &n) != METRALE_OK || n != 1) return (void*)1;
  return NULL;
}

static void callback_from_many_threads(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  log_thread_arg_t args[LOG_THREADS];
  pthread_barrier_t start;
  assert_int_equal(pthread_barrier_init(&start, NULL, LOG_THREADS), 0);
  for (int i = 0; i < LOG_THREADS; ++i) {
    args[i].shared = ctx;
    args[i].own = mt_open(NULL);
    args[i].start = &start;
  }
  reset_capture();
  pthread_mutex_lock(&warned_from.lock);
  warned_from.n = 0;
  pthread_mutex_unlock(&warned_from.lock);
  MT_OK(metrale_log_set_level(METRALE_LOG_TRACE));
  MT_OK(metrale_log_set_callback(on_log_with_thread, &cap));
  pthread_t t[LOG_THREADS];
  for (int i = 0; i < LOG_THREADS; ++i)
    assert_int_equal(pthread_create(&t[i], NULL, log_on_thread, &args[i]), 0);
  void* rc = NULL;
  int failures = 0;
  for (int i = 0; i < LOG_THREADS; ++i) {
    assert_int_equal(pthread_join(t[i], &rc), 0);
    failures += rc != NULL;
  }
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_int_equal(failures, 0);
  /* Every thread's warning reached the callback, in that thread. */
  assert_int_equal(cap.warn_naming_site, LOG_THREADS);
  assert_int_equal(warned_from.n, LOG_THREADS);
  for (int i = 0; i < warned_from.n; ++i)
    assert_false(pthread_equal(warned_from.ids[i], pthread_self()));
  assert_int_equal(cap.bad_level, 0);
  assert_int_equal(cap.newline_seen, 0);
  pthread_barrier_destroy(&start);
  for (int i = 0; i < LOG_THREADS; ++i) mt_close(args[i].own);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(callback_receives_warnings, teardown),
      cmocka_unit_test_teardown(set_level_filters, teardown),
      cmocka_unit_test_teardown(level_warn_hides_info, teardown),
      cmocka_unit_test_teardown(null_callback_restores_stderr, teardown),
      cmocka_unit_test_teardown(invalid_level_is_refused, teardown),
      cmocka_unit_test_teardown(callback_from_many_threads, teardown),
  };
  return MT_RUN(tests);
}
