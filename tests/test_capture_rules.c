/* Rules 1 and 3 of the header: a failed call did nothing (no work recorded
 * into a capture, no counter or trace change), and a graph never keeps
 * caller memory the API said the caller may reuse. Written for the host
 * backend and to hold on cuda as well. Host buffers are malloc'd and freed
 * before replay where the rule says the graph must not touch them: a replay
 * that did would be a use-after-free the ASan build reports. */
#include <stdlib.h>

#include "test_support.h"

#define BYTES 4096

static unsigned char* host_pattern(uint8_t v) {
  unsigned char* p = malloc(BYTES);
  assert_non_null(p);
  memset(p, v, BYTES);
  return p;
}

static void expect_device(metrale_context_t* ctx, metrale_devptr_t p, uint8_t v) {
  unsigned char* got = mt_read_device(ctx, p, BYTES);
  for (size_t i = 0; i < BYTES; ++i) {
    if (got[i] != v) {
      print_error("device byte %zu is 0x%02x, expected 0x%02x\n", i, got[i], v);
      free(got);
      fail();
    }
  }
  free(got);
}

static void expect_host(const unsigned char* p, uint8_t v) {
  for (size_t i = 0; i < BYTES; ++i) {
    if (p[i] != v) {
      print_error("host byte %zu is 0x%02x, expected 0x%02x\n", i, p[i], v);
      fail();
    }
  }
}

static void expect_counters_same(metrale_context_t* ctx, const metrale_counters_t* before) {
  metrale_counters_t now = mt_counters(ctx);
  assert_memory_equal(&now, before, sizeof now);
}

static size_t trace_count(metrale_context_t* ctx) {
  size_t n = 0;
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  return n;
}

static metrale_devptr_t device_pattern(metrale_context_t* ctx, uint8_t v) {
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, BYTES, &p));
  MT_OK(metrale_memset(ctx, p, v, BYTES));
  return p;
}

/* Ends the capture on s, replays the graph twice and destroys it. */
static void end_and_replay(metrale_context_t* ctx, metrale_stream_t* s) {
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  for (int i = 0; i < 2; ++i) {
    MT_OK(metrale_graph_launch(ctx, g, s));
    MT_OK(metrale_stream_synchronize(ctx, s));
  }
  MT_OK(metrale_graph_destroy(ctx, g));
}

/* The calls that wait for their stream are refused before they record:
 * their buffers, freed before the replay, are never touched by it. */
static void waiting_calls_are_refused_before_recording(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t dst = device_pattern(ctx, 0x01);    /* kept: must stay 0x01 */
  metrale_devptr_t src = device_pattern(ctx, 0x02);    /* freed before replay */
  metrale_devptr_t doomed = device_pattern(ctx, 0x03); /* freed before replay */
  unsigned char* h_src = host_pattern(0x10);
  unsigned char* h_dst = host_pattern(0x20); /* freed before replay */
  unsigned char* h_kept = host_pattern(0x30);
  mt_ledger_t ledger = mt_ledger(ctx);

  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_counters_t before = mt_counters(ctx);
  MT_STATUS(metrale_copy_h2d(ctx, h_src, BYTES, dst), METRALE_ERROR_CAPTURE);
  MT_MESSAGE_HAS("nothing was recorded");
  MT_STATUS(metrale_copy_d2h(ctx, src, h_dst, BYTES), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_copy_d2h(ctx, doomed, h_kept, BYTES), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_copy_d2h_on_stream(ctx, src, h_dst, BYTES, s), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_copy_d2h_on_stream(ctx, doomed, h_kept, BYTES, s), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_copy_d2d(ctx, src, dst, BYTES), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_memset(ctx, dst, 0xEE, BYTES), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_memset(ctx, doomed, 0xEE, BYTES), METRALE_ERROR_CAPTURE);
  expect_counters_same(ctx, &before);
  MT_LEDGER_SAME(ctx, ledger);

  /* The caller took CAPTURE at its word and let go of its buffers. */
  free(h_src);
  free(h_dst);
  MT_OK(metrale_free(ctx, src));
  MT_OK(metrale_free(ctx, doomed));
  end_and_replay(ctx, NULL);
  end_and_replay(ctx, s);
  expect_device(ctx, dst, 0x01);
  expect_host(h_kept, 0x30);

  free(h_kept);
  MT_OK(metrale_free(ctx, dst));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* copy_h2d_async in a capture: the graph owns a copy of src taken at the
 * call; the caller overwrites and frees src at once. */
static void h2d_async_in_a_capture_snapshots_the_source(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t a = device_pattern(ctx, 0x00);
  metrale_devptr_t b = device_pattern(ctx, 0x00);
  unsigned char* pageable = host_pattern(0x11);
  void* pinned = NULL;
  MT_OK(metrale_host_alloc_pinned(ctx, BYTES, &pinned));
  memset(pinned, 0x33, BYTES);

  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_counters_t before = mt_counters(ctx);
  MT_OK(metrale_copy_h2d_async(ctx, pageable, BYTES, a, s));
  memset(pageable, 0x22, BYTES);
  free(pageable);
  MT_OK(metrale_copy_h2d_async(ctx, pinned, BYTES, b, s));
  memset(pinned, 0x44, BYTES);
  MT_OK(metrale_host_free_pinned(ctx, pinned));
  metrale_counters_t after = mt_counters(ctx);
  assert_int_equal(after.h2d_copies, before.h2d_copies + 2);
  assert_int_equal(after.h2d_bytes, before.h2d_bytes + 2 * BYTES);
  /* No wait for the pinned source: it is not read after the call. */
  assert_int_equal(after.pinned_source_waits, before.pinned_source_waits);
  assert_int_equal(after.stream_syncs, before.stream_syncs);

  /* Nothing ran yet. */
  expect_device(ctx, a, 0x00);
  expect_device(ctx, b, 0x00);
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  for (int i = 0; i < 2; ++i) {
    MT_OK(metrale_memset(ctx, a, 0, BYTES));
    MT_OK(metrale_memset(ctx, b, 0, BYTES));
    MT_OK(metrale_graph_launch(ctx, g, s));
    MT_OK(metrale_stream_synchronize(ctx, s));
    expect_device(ctx, a, 0x11);
    expect_device(ctx, b, 0x33);
  }
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* copy_h2d_async_retained in a capture reads src at every replay (the caller
 * keeps it); copy_d2h_async writes dst at every replay (the caller's choice). */
static void retained_and_d2h_async_use_caller_memory_at_replay(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t d = device_pattern(ctx, 0x00);
  metrale_devptr_t from = device_pattern(ctx, 0x55);
  unsigned char* src = host_pattern(0x11);
  unsigned char* dst = host_pattern(0x44);

  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_copy_h2d_async_retained(ctx, src, BYTES, d, s));
  MT_OK(metrale_copy_d2h_async(ctx, from, dst, BYTES, s));
  memset(src, 0x22, BYTES);
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  expect_host(dst, 0x44); /* not before the replay */
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_device(ctx, d, 0x22);
  expect_host(dst, 0x55);
  memset(src, 0x23, BYTES);
  memset(dst, 0x44, BYTES);
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_synchronize(ctx, s));
  expect_device(ctx, d, 0x23);
  expect_host(dst, 0x55);
  MT_OK(metrale_graph_destroy(ctx, g));
  free(src);
  free(dst);
  MT_OK(metrale_free(ctx, d));
  MT_OK(metrale_free(ctx, from));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* A d2h copy refused for its range (checked pointers) or its arguments
 * records nothing: dst, freed before the replay, is never written. */
static void failed_d2h_records_nothing(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  metrale_context_t* ctx = mt_open(&o);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t small = device_pattern(ctx, 0x66);
  unsigned char* dst = host_pattern(0x20);
  unsigned char* kept = host_pattern(0x30);

  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_counters_t before = mt_counters(ctx);
  /* One byte past the allocation. */
  MT_STATUS(metrale_copy_d2h_on_stream(ctx, small + 1, dst, BYTES, s),
            METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2h_async(ctx, small + 1, kept, BYTES, s), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_d2h_async(ctx, small, NULL, BYTES, s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_h2d_async(ctx, kept, BYTES, small + 1, s), METRALE_ERROR_OUT_OF_BOUNDS);
  expect_counters_same(ctx, &before);
  free(dst);
  end_and_replay(ctx, s);
  expect_host(kept, 0x30);
  expect_device(ctx, small, 0x66);
  free(kept);
  MT_OK(metrale_free(ctx, small));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* An async call the backend refuses (checked pointers off: the range is
 * nobody's memory) leaves the counters and the launch trace as they were.
 * Host only: a GPU may take such a copy and fault later, which is not a
 * refusal (the ordering it checks lives in core, shared by both). */
static void backend_refusal_changes_no_counter_or_trace(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.launch_trace = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_require_host(ctx);
  metrale_devptr_t p = device_pattern(ctx, 0x01);
  const metrale_devptr_t nowhere = 0x10; /* no backend maps this */
  MT_OK(metrale_copy_d2d_async(ctx, p, p, 16, NULL)); /* the trace works */
  size_t traced = trace_count(ctx);
  assert_true(traced >= 1);
  metrale_counters_t before = mt_counters(ctx);
  assert_int_not_equal(metrale_copy_d2d_async(ctx, nowhere, p, 16, NULL), METRALE_OK);
  assert_int_not_equal(metrale_copy_d2d_async(ctx, p, nowhere, 16, NULL), METRALE_OK);
  assert_int_not_equal(metrale_copy_d2d_2d_async(ctx, nowhere, 16, p, 16, 16, 2, NULL),
                       METRALE_OK);
  assert_int_not_equal(metrale_memset_async(ctx, nowhere, 0, 16, NULL), METRALE_OK);
  MT_STATUS(metrale_copy_d2d_2d_async(ctx, p, 8, p, 16, 16, 2, NULL),
            METRALE_ERROR_INVALID_ARGUMENT);
  expect_counters_same(ctx, &before);
  assert_int_equal(trace_count(ctx), traced);
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_context_fault(ctx));
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* With debug_sync on, a launch in a capture is recorded and returns OK: the
 * wait is skipped, not attempted after the launch was recorded. */
static void debug_sync_launch_in_a_capture(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.debug_sync = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = device_pattern(ctx, 0x00);
  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_counters_t before = mt_counters(ctx);
  MT_OK(mt_fill_u32(ctx, s, p, 0x07070707u, BYTES / 4));
  metrale_counters_t after = mt_counters(ctx);
  assert_int_equal(after.launches, before.launches + 1);
  assert_int_equal(after.stream_syncs, before.stream_syncs);
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 1);
  expect_device(ctx, p, 0x00);
  end_and_replay(ctx, s);
  expect_device(ctx, p, 0x07);
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

static metrale_status_t refusing_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_ERROR_INVALID_ARGUMENT;
}

/* A launch the backend refuses leaves the trace and the counters as they
 * were: a host kernel that fails, or on a GPU a block too large to run. */
static void backend_refused_launch_changes_no_trace(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.launch_trace = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_devptr_t p = device_pattern(ctx, 0x00);
  metrale_kernel_t* k = NULL;
  metrale_dim3_t one = {1, 1, 1}, block = {1, 1, 1};
  if (mt_is_host(ctx)) {
    MT_OK(metrale_module_register_host(ctx, "capture_rules", "refuse", refusing_kernel, NULL));
    MT_OK(metrale_kernel_get(ctx, "capture_rules", "refuse", &k));
  } else {
    k = mt_kernel(ctx, "fill_u32");
    block.x = 4096; /* more threads than any GPU block holds */
  }
  uint64_t n = 1;
  uint32_t v = 1;
  void* params[] = {&p, &v, &n};
  size_t traced = trace_count(ctx);
  metrale_counters_t before = mt_counters(ctx);
  assert_int_not_equal(metrale_launch(ctx, k, one, block, 0, NULL, params), METRALE_OK);
  expect_counters_same(ctx, &before);
  assert_int_equal(trace_count(ctx), traced);
  MT_OK(metrale_context_fault(ctx));
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* A timed launch the backend refuses leaves no timing behind: no row with
 * zero launches appears in the timings (found by the fuzzer). */
static void backend_refused_timed_launch_lists_no_timing(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.kernel_timing = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_devptr_t p = device_pattern(ctx, 0x00);
  metrale_kernel_t* k = NULL;
  metrale_dim3_t one = {1, 1, 1}, block = {1, 1, 1};
  if (mt_is_host(ctx)) {
    MT_OK(metrale_module_register_host(ctx, "capture_rules", "refuse", refusing_kernel, NULL));
    MT_OK(metrale_kernel_get(ctx, "capture_rules", "refuse", &k));
  } else {
    k = mt_kernel(ctx, "fill_u32");
    block.x = 4096; /* more threads than any GPU block holds */
  }
  uint64_t n = 1;
  uint32_t v = 1;
  void* params[] = {&p, &v, &n};
  assert_int_not_equal(metrale_launch(ctx, k, one, block, 0, NULL, params), METRALE_OK);
  size_t rows = 99;
  MT_OK(metrale_kernel_timings_read(ctx, NULL, 0, &rows));
  assert_int_equal(rows, 0);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* A launch refused by core (a zero dimension) changes neither the trace
 * nor the counters, and records nothing. */
static void refused_launch_changes_nothing(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.launch_trace = 1;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = device_pattern(ctx, 0x00);
  metrale_kernel_t* k = mt_kernel(ctx, "fill_u32");
  uint64_t n = BYTES / 4;
  uint32_t v = 0x09090909u;
  void* params[] = {&p, &v, &n};
  metrale_dim3_t zero = {0, 1, 1}, one = {1, 1, 1}, block = {256, 1, 1};
  MT_OK(metrale_graph_begin_capture(ctx, s));
  size_t traced = trace_count(ctx);
  metrale_counters_t before = mt_counters(ctx);
  MT_STATUS(metrale_launch(ctx, k, zero, block, 0, s, params), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch(ctx, k, one, zero, 0, s, params), METRALE_ERROR_INVALID_ARGUMENT);
  expect_counters_same(ctx, &before);
  assert_int_equal(trace_count(ctx), traced);
  end_and_replay(ctx, s);
  expect_device(ctx, p, 0x00);
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* Allocating and freeing with red zones during a capture fills the pads at
 * once: nothing of it goes into the graph. */
static void redzone_alloc_in_a_capture_records_nothing(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  metrale_context_t* ctx = mt_open(&o);
  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  metrale_devptr_t p = 0;
  metrale_status_t st = metrale_alloc(ctx, BYTES, &p);
  if (st != METRALE_OK) {
    /* A driver may refuse allocation on a capturing thread: then the
     * capture must still be intact. */
    assert_int_equal(metrale_stream_is_capturing(ctx, NULL), 1);
  }
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, NULL, &g));
  if (st == METRALE_OK) {
    size_t n = 0;
    MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
    assert_int_equal(n, 0);
    MT_OK(metrale_free(ctx, p));
  }
  /* The pad fill was not recorded: replaying after the free writes nothing. */
  MT_OK(metrale_graph_launch(ctx, g, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_graph_destroy(ctx, g));
  mt_close(ctx);
}

/* A graph launch into a capturing stream is refused (the driver would
 * invalidate the capture); the capture goes on, and waiting for another
 * stream, allocating and freeing on the capturing thread leave it intact. */
static void graph_launch_into_a_capture_is_refused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  metrale_devptr_t p = device_pattern(ctx, 0x00);
  metrale_devptr_t q = device_pattern(ctx, 0x00);
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_memset_async(ctx, p, 0x42, BYTES, s));
  metrale_graph_t* inner = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &inner));

  MT_OK(metrale_graph_begin_capture(ctx, s));
  metrale_counters_t before = mt_counters(ctx);
  MT_STATUS(metrale_graph_launch(ctx, inner, s), METRALE_ERROR_CAPTURE);
  MT_STATUS(metrale_stream_synchronize(ctx, s), METRALE_ERROR_CAPTURE);
  expect_counters_same(ctx, &before);
  MT_OK(metrale_graph_destroy(ctx, inner));
  /* Other work of this thread beside the capture. */
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  metrale_devptr_t extra = 0;
  MT_OK(metrale_alloc(ctx, 256, &extra));
  MT_OK(metrale_free(ctx, extra));
  assert_int_equal(metrale_stream_is_capturing(ctx, s), 1);
  MT_OK(metrale_memset_async(ctx, q, 0x24, BYTES, s));
  end_and_replay(ctx, s);
  expect_device(ctx, p, 0x00); /* the inner graph's memset never ran */
  expect_device(ctx, q, 0x24);
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_free(ctx, q));
  MT_OK(metrale_stream_destroy(ctx, s));
  mt_close(ctx);
}

/* cuda joins a stream that waits for an event recorded in a capture to
 * that capture (fork/join); the host backend's captures record one stream,
 * so the wait is refused instead of letting the branch run once, now, and
 * never at replay. After a replay the event is an ordinary one again. */
static void host_fork_from_a_capture_is_unsupported(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  metrale_stream_t *s = NULL, *s2 = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_stream_create(ctx, &s2));
  metrale_event_t* fork = NULL;
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DISABLE_TIMING, &fork));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_event_record(ctx, fork, s));
  MT_STATUS(metrale_stream_wait_event(ctx, s2, fork), METRALE_ERROR_UNSUPPORTED);
  assert_non_null(strstr(metrale_last_error_message(), "fork/join"));
  MT_OK(metrale_stream_wait_event(ctx, s, fork)); /* within the capture: fine */
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));
  MT_STATUS(metrale_stream_wait_event(ctx, s2, fork), METRALE_ERROR_UNSUPPORTED);
  MT_OK(metrale_graph_launch(ctx, g, s));
  MT_OK(metrale_stream_wait_event(ctx, s2, fork)); /* stamped by the replay */
  MT_OK(metrale_graph_destroy(ctx, g));
  MT_OK(metrale_event_destroy(ctx, fork));
  MT_OK(metrale_stream_destroy(ctx, s));
  MT_OK(metrale_stream_destroy(ctx, s2));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(waiting_calls_are_refused_before_recording),
      cmocka_unit_test(h2d_async_in_a_capture_snapshots_the_source),
      cmocka_unit_test(retained_and_d2h_async_use_caller_memory_at_replay),
      cmocka_unit_test(failed_d2h_records_nothing),
      cmocka_unit_test(backend_refusal_changes_no_counter_or_trace),
      cmocka_unit_test(debug_sync_launch_in_a_capture),
      cmocka_unit_test(refused_launch_changes_nothing),
      cmocka_unit_test(backend_refused_launch_changes_no_trace),
      cmocka_unit_test(backend_refused_timed_launch_lists_no_timing),
      cmocka_unit_test(redzone_alloc_in_a_capture_records_nothing),
      cmocka_unit_test(graph_launch_into_a_capture_is_refused),
      cmocka_unit_test(host_fork_from_a_capture_is_unsupported),
  };
  return MT_RUN(tests);
}
