/* Graphs by stream capture: capture, end, replay and check; a graph of 100
 * launches; abort; is_capturing; capture state errors. */
#include <stdlib.h>

#include "test_support.h"

#define N 512

static void upload_floats(metrale_context_t* ctx, metrale_devptr_t p, float v) {
  float h[N];
  for (int i = 0; i < N; ++i) h[i] = v;
  MT_OK(metrale_copy_h2d(ctx, h, sizeof h, p));
}

static void expect_floats(metrale_context_t* ctx, metrale_devptr_t p, float v) {
  float* got = mt_read_device(ctx, p, N * sizeof(float));
  for (int i = 0; i < N; ++i) {
    if (got[i] != v) {
      print_error("element %d is %f, expected %f\n", i, (double)got[i], (double)v);
      free(got);
      fail();
    }
  }
  free(got);
}

static void expect_bytes(metrale_context_t* ctx, metrale_devptr_t p, size_t n, uint8_t v) {
  unsigned char* got = mt_read_device(ctx, p, n);
  for (size_t i = 0; i < n; ++i) assert_int_equal(got[i], v);
  free(got);
}

static void capture_replay_sequence(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t ones = 0, acc = 0, copy = 0, marker = 0;
  MT_OK(metrale_alloc(ctx, N * sizeof(float), &ones));
  MT_OK(metrale_alloc(ctx, N * sizeof(float), &acc));
  MT_OK(metrale_alloc(ctx, N * sizeof(float), &copy));
  MT_OK(metrale_alloc(ctx, 64, &marker));
  upload_floats(ctx, ones, 1.0f);
  upload_floats(ctx, acc, 0.0f);
  upload_floats(ctx, copy, -1.0f);
  MT_OK(metrale_memset(ctx, marker, 0, 64));

  MT_OK(metrale_graph_begin_capture(ctx, s));
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 1);
  MT_OK(mt_add_f32(ctx, s, ones, acc, acc, N)); /* acc += 1 */
  MT_OK(metrale_copy_d2d_async(ctx, acc, copy, N * sizeof(float), s));
  MT_OK(metrale_memset_async(ctx, marker, 0x5D, 64, s));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  assert_non_null(g);
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);

  /* Captured work has not run. */
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_floats(ctx, acc, 0.0f);
  expect_floats(ctx, copy, -1.0f);
  expect_bytes(ctx, marker, 64, 0);

  for (int replay = 1; replay <= 3; ++replay) {
    MT_OK(metrale_graph_launch(ctx, g, s));
    MT_OK(metrale_stream_synchronize(ctx, s));
    expect_floats(ctx, acc, (float)replay);
    expect_floats(ctx, copy, (float)replay);
    expect_bytes(ctx, marker, 64, 0x5D);
  }
  /* Replays on another stream too. */
  MT_OK(metrale_graph_launch(ctx, g, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  expect_floats(ctx, acc, 4.0f);

  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_graph_destroy(ctx, NULL));
  MT_OK(metrale_free(ctx, ones));
  MT_OK(metrale_free(ctx, acc));
  MT_OK(metrale_free(ctx, copy));
  MT_OK(metrale_free(ctx, marker));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void graph_of_100_launches(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t ones = 0, acc = 0;
  MT_OK(metrale_alloc(ctx, N * sizeof(float), &ones));
  MT_OK(metrale_alloc(ctx, N * sizeof(float), &acc));
  upload_floats(ctx, ones, 1.0f);
  upload_floats(ctx, acc, 0.0f);
  MT_OK(metrale_counters_reset(ctx));

  MT_OK(metrale_graph_begin_capture(ctx, s));
  for (int i = 0; i < 100; ++i) MT_OK(mt_add_f32(ctx, s, ones, acc, acc, N));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));

  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_floats(ctx, acc, 200.0f);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.graph_launches, 2);

  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_free(ctx, ones));
  MT_OK(metrale_free(ctx, acc));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void graph_keeps_launch_values(void** state) {
  (void)state;
  /* Parameters are copied at launch, as on a GPU: changing the host
   * variable after capture does not change the replay. */
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64 * 4, &p));
  MT_OK(metrale_memset(ctx, p, 0, 64 * 4));
  metrale_kernel_t* k = mt_kernel(ctx, "fill_u32");
  uint32_t value = 41;
  uint64_t n = 64;
  void* params[] = {&p, &value, &n};
  metrale_dim3_t one = {1, 1, 1}, block = {64, 1, 1};
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_launch(ctx, k, one, block, 0, s, params));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  value = 99;
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  uint32_t* got = mt_read_device(ctx, p, 64 * 4);
  for (int i = 0; i < 64; ++i) assert_int_equal(got[i], 41);
  free(got);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void abort_drops_work(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 256, &p));
  MT_OK(metrale_memset(ctx, p, 0x01, 256));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_memset_async(ctx, p, 0x77, 256, s));
  MT_OK(metrale_graph_abort_capture(ctx, s));
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_bytes(ctx, p, 256, 0x01);
  /* The stream works normally afterwards. */
  MT_OK(metrale_memset_async(ctx, p, 0x02, 256, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_bytes(ctx, p, 256, 0x02);
  /* Abort without a capture is OK. */
  MT_OK(metrale_graph_abort_capture(ctx, s));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void end_without_begin_is_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_graph_t* g = (metrale_graph_t*)s;
  MT_STATUS(metrale_graph_end_capture(ctx, s, &g), METRALE_ERROR_CAPTURE);
  assert_ptr_equal(g, (metrale_graph_t*)s); /* out untouched */
  MT_STATUS(metrale_graph_end_capture(ctx, NULL, &g), METRALE_ERROR_CAPTURE);
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void begin_twice_is_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_status_t second = metrale_graph_begin_capture(ctx, s);
  /* The first capture is still active. */
  int capturing = metrale_stream_is_capturing(ctx, s);
  /* Abort before asserting, so a failure here leaves no capture behind. */
  metrale_status_t aborted = metrale_graph_abort_capture(ctx, s);
  MT_STATUS(second, METRALE_ERROR_CAPTURE);
  assert_int_equal(capturing, 1);
  MT_STATUS(aborted, METRALE_OK);
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 0);
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void sync_while_capturing_is_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_STATUS(metrale_stream_synchronize(ctx, s), METRALE_ERROR_CAPTURE);
  MT_OK(metrale_graph_abort_capture(ctx, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void empty_capture_replays_as_no_op(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  assert_non_null(g);
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static void destroy_ends_an_active_capture(void** state) {
  (void)state;
  /* A context destroyed mid-capture must not leave the thread capturing:
   * the next context's allocations and syncs must work. */
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  mt_close(ctx);
  metrale_context_t* next = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(next, 64, &p));
  MT_OK(metrale_memset(next, p, 1, 64));
  MT_OK(metrale_stream_synchronize(next, NULL));
  MT_OK(metrale_free(next, p));
  mt_close(next);
}

static void is_capturing_on_failed_query(void** state) {
  (void)state;
  /* A failed query (bad context) counts as capturing. */
  assert_int_equal(metrale_stream_is_capturing(NULL, NULL), 1);
  assert_true(metrale_last_error_message()[0] != '\0');
}

static void default_stream_can_capture(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 128, &p));
  MT_OK(metrale_memset(ctx, p, 0, 128));
  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  assert_int_equal(metrale_stream_is_capturing(ctx, NULL), 1);
  MT_OK(metrale_memset_async(ctx, p, 0x44, 128, NULL));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, NULL, &g));
  expect_bytes(ctx, p, 128, 0);
  MT_OK(metrale_graph_launch(ctx, g, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  expect_bytes(ctx, p, 128, 0x44);
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(capture_replay_sequence),
      cmocka_unit_test(graph_of_100_launches),
      cmocka_unit_test(graph_keeps_launch_values),
      cmocka_unit_test(abort_drops_work),
      cmocka_unit_test(end_without_begin_is_capture),
      cmocka_unit_test(begin_twice_is_capture),
      cmocka_unit_test(sync_while_capturing_is_capture),
      cmocka_unit_test(empty_capture_replays_as_no_op),
      cmocka_unit_test(destroy_ends_an_active_capture),
      cmocka_unit_test(is_capturing_on_failed_query),
      cmocka_unit_test(default_stream_can_capture),
  };
  return MT_RUN(tests);
}
