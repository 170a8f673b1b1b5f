/* Streams and events: create, destroy, synchronize, the default stream,
 * events with and without timing, query, elapsed time, wait_event. */
#include <math.h>
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

static void create_sync_destroy(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* a = NULL;
  metrale_stream_t* b = NULL;
  MT_OK(metrale_stream_create(ctx, &a));
  MT_OK(metrale_stream_create(ctx, &b));
  assert_non_null(a);
  assert_non_null(b);
  assert_ptr_not_equal(a, b);
  assert_ptr_not_equal(a, metrale_default_stream(ctx));
  MT_OK(metrale_stream_synchronize(ctx, a));
  MT_OK(metrale_stream_synchronize(ctx, b));
  assert_int_equal(metrale_stream_is_capturing(ctx, a), 0);
  MT_OK(metrale_stream_destroy(ctx, a));
  MT_OK(metrale_stream_destroy(ctx, b));
  MT_OK(metrale_stream_destroy(ctx, NULL));
  mt_close(ctx);
}

static void default_stream_is_the_context_s(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* d = metrale_default_stream(ctx);
  assert_non_null(d);
  assert_ptr_equal(d, metrale_default_stream(ctx));
  assert_null(metrale_default_stream(NULL));
  MT_OK(metrale_stream_synchronize(ctx, d));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_STATUS(metrale_stream_destroy(ctx, d), METRALE_ERROR_INVALID_ARGUMENT);
  /* Still usable after the refusal. */
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  MT_OK(metrale_memset_async(ctx, p, 9, 64, d));
  MT_OK(metrale_stream_synchronize(ctx, d));
  unsigned char* got = mt_read_device(ctx, p, 64);
  for (int i = 0; i < 64; ++i) assert_int_equal(got[i], 9);
  free(got);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void stream_orders_its_work(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(metrale_alloc(ctx, 4096, &b));
  for (int v = 1; v <= 20; ++v) {
    MT_OK(metrale_memset_async(ctx, a, (uint8_t)v, 4096, s));
    MT_OK(metrale_copy_d2d_async(ctx, a, b, 4096, s));
  }
  MT_OK(metrale_stream_synchronize(ctx, s));
  unsigned char* got = mt_read_device(ctx, b, 4096);
  for (int i = 0; i < 4096; ++i) assert_int_equal(got[i], 20);
  free(got);
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* --- events ------------------------------------------------------------------- */

static void event_record_sync_query(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  const unsigned flags[] = {METRALE_EVENT_DEFAULT, METRALE_EVENT_DISABLE_TIMING};
  for (int i = 0; i < 2; ++i) {
    metrale_event_t* e = NULL;
    MT_OK(metrale_event_create(ctx, flags[i], &e));
    assert_non_null(e);
    MT_OK(metrale_event_record(ctx, e, s));
    MT_OK(metrale_event_synchronize(ctx, e));
    int done = -1;
    MT_OK(metrale_event_query(ctx, e, &done));
    assert_int_equal(done, 1);
    MT_OK(metrale_event_record(ctx, e, NULL)); /* default stream */
    MT_OK(metrale_stream_synchronize(ctx, NULL));
    MT_OK(metrale_event_query(ctx, e, &done));
    assert_int_equal(done, 1);
    MT_OK(metrale_event_destroy(ctx, e));
  }
  MT_OK(metrale_event_destroy(ctx, NULL));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void unknown_event_flags_are_invalid(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_event_t* e = (metrale_event_t*)ctx;
  MT_STATUS(metrale_event_create(ctx, 0x80u, &e), METRALE_ERROR_INVALID_ARGUMENT);
  assert_ptr_equal(e, (metrale_event_t*)ctx);
  mt_close(ctx);
}

static void elapsed_between_timing_events(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_event_t* start = NULL;
  metrale_event_t* end = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &start));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &end));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 1 << 16, &p));
  MT_OK(metrale_event_record(ctx, start, NULL));
  MT_OK(metrale_memset_async(ctx, p, 1, 1 << 16, NULL));
  MT_OK(metrale_event_record(ctx, end, NULL));
  MT_OK(metrale_event_synchronize(ctx, end));
  float ms = -1.0f;
  MT_OK(metrale_event_elapsed_ms(ctx, start, end, &ms));
  assert_true(isfinite(ms) && ms >= 0.0f);
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_event_destroy(ctx, start));
  MT_OK(metrale_event_destroy(ctx, end));
  mt_close(ctx);
}

static void elapsed_refuses_untimed_or_unrecorded(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_event_t* timed = NULL;
  metrale_event_t* untimed = NULL;
  metrale_event_t* never = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &timed));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DISABLE_TIMING, &untimed));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &never));
  MT_OK(metrale_event_record(ctx, timed, NULL));
  MT_OK(metrale_event_record(ctx, untimed, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  float ms = 0.0f;
  MT_STATUS(metrale_event_elapsed_ms(ctx, timed, untimed, &ms), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_elapsed_ms(ctx, untimed, timed, &ms), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_elapsed_ms(ctx, timed, never, &ms), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_elapsed_ms(ctx, never, timed, &ms), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_elapsed_ms(ctx, timed, timed, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_event_destroy(ctx, timed));
  MT_OK(metrale_event_destroy(ctx, untimed));
  MT_OK(metrale_event_destroy(ctx, never));
  mt_close(ctx);
}

static void wait_event_orders_two_streams(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* producer = NULL;
  metrale_stream_t* consumer = NULL;
  MT_OK(metrale_stream_create(ctx, &producer));
  MT_OK(metrale_stream_create(ctx, &consumer));
  metrale_event_t* ready = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DISABLE_TIMING, &ready));
  enum { BYTES = 1 << 20 };
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &a));
  MT_OK(metrale_alloc(ctx, BYTES, &b));
  MT_OK(metrale_memset(ctx, a, 0, BYTES));
  MT_OK(metrale_memset_async(ctx, a, 0x7E, BYTES, producer));
  MT_OK(metrale_event_record(ctx, ready, producer));
  MT_OK(metrale_stream_wait_event(ctx, consumer, ready));
  MT_OK(metrale_copy_d2d_async(ctx, a, b, BYTES, consumer));
  unsigned char* out = malloc(BYTES);
  assert_non_null(out);
  MT_OK(metrale_copy_d2h_async(ctx, b, out, BYTES, consumer));
  MT_OK(metrale_stream_synchronize(ctx, consumer));
  for (int i = 0; i < BYTES; i += 997) assert_int_equal(out[i], 0x7E);
  assert_int_equal(out[BYTES - 1], 0x7E);
  free(out);
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_event_destroy(ctx, ready));
  MT_OK(metrale_stream_destroy(ctx, producer));
  MT_OK(metrale_stream_destroy(ctx, consumer));
  mt_close(ctx);
}

static void sync_counts_stream_syncs(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_counters_reset(ctx));
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  assert_true(mt_counters(ctx).stream_syncs >= 2);
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* A pthread key destructor runs after the thread's C++ thread_local objects
 * were destroyed (a per-thread cache clearing its buffers at thread exit):
 * stream work put there runs as anywhere else, and what the thread recorded
 * of the streams whose work it runs (host backend) was not kept in a
 * destroyed vector (AddressSanitizer: heap-use-after-free in
 * StreamLock::lock). */
static metrale_context_t* exit_ctx;
static metrale_stream_t* exit_stream;
static pthread_key_t exit_key;
static int exit_ok;

static void stream_work_at_thread_exit(void* value) {
  const metrale_devptr_t p = (metrale_devptr_t)(uintptr_t)value;
  unsigned char back[64] = {0};
  exit_ok = metrale_memset_async(exit_ctx, p, 0x3C, sizeof back, exit_stream) == METRALE_OK &&
            metrale_stream_synchronize(exit_ctx, exit_stream) == METRALE_OK &&
            metrale_copy_d2h_on_stream(exit_ctx, p, back, sizeof back, exit_stream) ==
                METRALE_OK &&
            back[0] == 0x3C && back[sizeof back - 1] == 0x3C;
}

static void* stream_work_then_exit(void* arg) {
  metrale_devptr_t p = *(metrale_devptr_t*)arg;
  /* The thread ran work of two streams before its exit. */
  if (metrale_memset_async(exit_ctx, p, 1, 64, exit_stream) != METRALE_OK) return (void*)1;
  if (metrale_memset_async(exit_ctx, p, 2, 64, NULL) != METRALE_OK) return (void*)1;
  if (metrale_stream_synchronize(exit_ctx, exit_stream) != METRALE_OK) return (void*)1;
  pthread_setspecific(exit_key, (void*)(uintptr_t)p);
  return NULL;
}

static void stream_work_at_thread_exit_runs(void** state) {
  (void)state;
  exit_ctx = mt_open(NULL);
  exit_ok = 0;
  MT_OK(metrale_stream_create(exit_ctx, &exit_stream));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(exit_ctx, 64, &p));
  assert_int_equal(pthread_key_create(&exit_key, stream_work_at_thread_exit), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, stream_work_then_exit, &p), 0);
  void* r = (void*)1;
  assert_int_equal(pthread_join(t, &r), 0);
  pthread_key_delete(exit_key);
  assert_null(r);
  assert_true(exit_ok);
  MT_OK(metrale_free(exit_ctx, p));
  MT_OK(metrale_stream_destroy(exit_ctx, exit_stream));
  mt_close(exit_ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(create_sync_destroy),
      cmocka_unit_test(default_stream_is_the_context_s),
      cmocka_unit_test(stream_orders_its_work),
      cmocka_unit_test(event_record_sync_query),
      cmocka_unit_test(unknown_event_flags_are_invalid),
      cmocka_unit_test(elapsed_between_timing_events),
      cmocka_unit_test(elapsed_refuses_untimed_or_unrecorded),
      cmocka_unit_test(wait_event_orders_two_streams),
      cmocka_unit_test(sync_counts_stream_syncs),
      cmocka_unit_test(stream_work_at_thread_exit_runs),
  };
  return MT_RUN(tests);
}
