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

static void* sweep_on_thread(void* arg) {
  metrale_context_t* ctx = arg;
  for (int i = 0; i < 20; ++i) {
    metrale_devptr_t p = 0;
    if (metrale_alloc_at(ctx, 64, "leaky_site.c", 1, &p) != METRALE_OK) return (void*)1;
    if (metrale_free(ctx, p) != METRALE_OK) return (void*)1;
  }
  return NULL;
}

static void callback_from_many_threads(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  reset_capture();
  MT_OK(metrale_log_set_level(METRALE_LOG_TRACE));
  MT_OK(metrale_log_set_callback(on_log, &cap));
  pthread_t t[4];
  for (int i = 0; i < 4; ++i) assert_int_equal(pthread_create(&t[i], NULL, sweep_on_thread, ctx), 0);
  void* rc = NULL;
  int failures = 0;
  for (int i = 0; i < 4; ++i) {
    assert_int_equal(pthread_join(t[i], &rc), 0);
    failures += rc != NULL;
  }
  leak_and_sweep(ctx);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  assert_int_equal(failures, 0);
  assert_true(cap.warn_naming_site >= 1);
  assert_int_equal(cap.bad_level, 0);
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
