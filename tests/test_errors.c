/* Status names, the thread-local last error message, the version. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

/* --- status names ------------------------------------------------------- */

static void status_names_match_enumerators(void** state) {
  (void)state;
  static const struct {
    metrale_status_t s;
    const char* name;
  } table[] = {
      {METRALE_OK, "METRALE_OK"},
      {METRALE_ERROR_INVALID_ARGUMENT, "METRALE_ERROR_INVALID_ARGUMENT"},
      {METRALE_ERROR_OUT_OF_MEMORY, "METRALE_ERROR_OUT_OF_MEMORY"},
      {METRALE_ERROR_NOT_FOUND, "METRALE_ERROR_NOT_FOUND"},
      {METRALE_ERROR_NO_DRIVER, "METRALE_ERROR_NO_DRIVER"},
      {METRALE_ERROR_NO_DEVICE, "METRALE_ERROR_NO_DEVICE"},
      {METRALE_ERROR_UNSUPPORTED, "METRALE_ERROR_UNSUPPORTED"},
      {METRALE_ERROR_CONTEXT_LOST, "METRALE_ERROR_CONTEXT_LOST"},
      {METRALE_ERROR_REDZONE_CORRUPTED, "METRALE_ERROR_REDZONE_CORRUPTED"},
      {METRALE_ERROR_OUT_OF_BOUNDS, "METRALE_ERROR_OUT_OF_BOUNDS"},
      {METRALE_ERROR_CAPTURE, "METRALE_ERROR_CAPTURE"},
      {METRALE_ERROR_BUFFER_TOO_SMALL, "METRALE_ERROR_BUFFER_TOO_SMALL"},
      {METRALE_ERROR_DRIVER, "METRALE_ERROR_DRIVER"},
      {METRALE_ERROR_INTERNAL, "METRALE_ERROR_INTERNAL"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    const char* got = metrale_status_name(table[i].s);
    assert_non_null(got);
    assert_string_equal(got, table[i].name);
  }
}

static void status_name_outside_enum_is_unknown(void** state) {
  (void)state;
  assert_string_equal(metrale_status_name((metrale_status_t)14), "METRALE_UNKNOWN_STATUS");
  assert_string_equal(metrale_status_name((metrale_status_t)-1), "METRALE_UNKNOWN_STATUS");
  assert_string_equal(metrale_status_name((metrale_status_t)100000), "METRALE_UNKNOWN_STATUS");
}

static void status_name_is_static_storage(void** state) {
  (void)state;
  const char* a = metrale_status_name(METRALE_ERROR_CAPTURE);
  const char* b = metrale_status_name(METRALE_ERROR_CAPTURE);
  assert_ptr_equal(a, b);
}

/* --- last error message ------------------------------------------------- */

static void last_error_never_null(void** state) {
  (void)state;
  assert_non_null(metrale_last_error_message());
}

static void failed_call_sets_message(void** state) {
  (void)state;
  MT_STATUS(metrale_context_options_init(NULL), METRALE_ERROR_INVALID_ARGUMENT);
  const char* msg = metrale_last_error_message();
  assert_non_null(msg);
  assert_true(strlen(msg) > 0);
}

static void message_is_per_failure(void** state) {
  (void)state;
  MT_STATUS(metrale_log_set_level((metrale_log_level_t)42), METRALE_ERROR_INVALID_ARGUMENT);
  char first[512];
  snprintf(first, sizeof first, "%s", metrale_last_error_message());
  MT_STATUS(metrale_context_create(NULL, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  /* Two different mistakes, two different explanations. */
  assert_string_not_equal(first, metrale_last_error_message());
}

static void* fail_on_other_thread(void* arg) {
  (void)arg;
  metrale_status_t s = metrale_context_options_init(NULL);
  return (void*)(intptr_t)(s == METRALE_ERROR_INVALID_ARGUMENT &&
                           metrale_last_error_message()[0] != '\0');
}


static void message_is_thread_local(void** state) {
  (void)state;
  /* A fresh thread that never failed reads "". */
  pthread_t t;
  void* ok = NULL;
  assert_int_equal(pthread_create(&t, NULL, fail_on_other_thread, NULL), 0);
  assert_int_equal(pthread_join(t, &ok), 0);
  assert_true((intptr_t)ok);
}

static void* read_fresh_message(void* arg) {
  const char* msg = metrale_last_error_message();
  *(int*)arg = (msg != NULL && msg[0] == '\0');
  return NULL;
}

static void fresh_thread_has_empty_message(void** state) {
  (void)state;
  MT_STATUS(metrale_context_options_init(NULL), METRALE_ERROR_INVALID_ARGUMENT);
  int empty = 0;
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, read_fresh_message, &empty), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  assert_true(empty);
  /* ... while this thread still has its own. */
  assert_true(metrale_last_error_message()[0] != '\0');
}

/* A pthread key destructor runs after the thread's C++ thread_local objects
 * were destroyed: a failing call made there (a per-thread cache releasing
 * what it holds at thread exit) still gets its message, and earlier ones
 * left nothing behind to write through (the message was a destroyed
 * std::string: "double free detected", or a write into freed memory). */
static pthread_key_t exit_key;
static char exit_message[512];
static metrale_status_t exit_status;

static void fail_at_thread_exit(void* value) {
  (void)value;
  /* Longer than the thread's message before: the storage grows. */
  metrale_context_options_t opts;
  exit_status = metrale_context_options_init_sized(&opts, 3);
  snprintf(exit_message, sizeof exit_message, "%s", metrale_last_error_message());
  metrale_status_t again = metrale_context_create(NULL, NULL);
  if (again != METRALE_ERROR_INVALID_ARGUMENT || metrale_last_error_message()[0] == '\0') {
    exit_status = METRALE_ERROR_INTERNAL;
  }
}

static void* fail_then_exit(void* arg) {
  (void)arg;
  /* A message of this thread's before its exit (longer than a short
   * string's inline bytes, so it lives on the heap). */
  (void)metrale_tag_pop();
  pthread_setspecific(exit_key, (void*)1);
  return NULL;
}

static void message_survives_thread_exit(void** state) {
  (void)state;
  exit_status = METRALE_OK;
  exit_message[0] = '\0';
  assert_int_equal(pthread_key_create(&exit_key, fail_at_thread_exit), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, fail_then_exit, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_key_delete(exit_key);
  assert_int_equal(exit_status, METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(strstr(exit_message, "struct_size is 3") != NULL);
}

/* --- version -------------------------------------------------------------- */

static void version_matches_header(void** state) {
  (void)state;
  int major = -1, minor = -1, patch = -1;
  MT_OK(metrale_version(&major, &minor, &patch));
  assert_int_equal(major, METRALE_VERSION_MAJOR);
  assert_int_equal(minor, METRALE_VERSION_MINOR);
  assert_int_equal(patch, METRALE_VERSION_PATCH);
}

static void version_accepts_null(void** state) {
  (void)state;
  int minor = -1;
  MT_OK(metrale_version(NULL, NULL, NULL));
  MT_OK(metrale_version(NULL, &minor, NULL));
  assert_int_equal(minor, METRALE_VERSION_MINOR);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(status_names_match_enumerators),
      cmocka_unit_test(status_name_outside_enum_is_unknown),
      cmocka_unit_test(status_name_is_static_storage),
      cmocka_unit_test(last_error_never_null),
      cmocka_unit_test(failed_call_sets_message),
      cmocka_unit_test(message_is_per_failure),
      cmocka_unit_test(message_is_thread_local),
      cmocka_unit_test(fresh_thread_has_empty_message),
      cmocka_unit_test(message_survives_thread_exit),
      cmocka_unit_test(version_matches_header),
      cmocka_unit_test(version_accepts_null),
  };
  return MT_RUN(tests);
}
