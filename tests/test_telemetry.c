/* Counters after known operations, reset, the launch trace, the kernel
 * audit size query and kernel timings. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "failing_new.h"
#include "test_support.h"

static const metrale_dim3_t ONE = {1, 1, 1};

static void counters_follow_operations(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = mt_kernel(ctx, "empty_kernel");
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 1000, &a));
  MT_OK(metrale_alloc(ctx, 24, &b));
  MT_OK(metrale_counters_reset(ctx));
  metrale_counters_t zero = mt_counters(ctx);
  assert_int_equal(zero.launches + zero.h2d_copies + zero.d2h_copies + zero.allocs + zero.frees +
                       zero.memsets + zero.d2d_copies + zero.kernel_lookups,
                   0);

  unsigned char host[1000] = {0};
  metrale_devptr_t c = 0;
  MT_OK(metrale_alloc(ctx, 500, &c));
  MT_OK(metrale_copy_h2d(ctx, host, 100, a));
  MT_OK(metrale_copy_h2d_async(ctx, host, 200, a, NULL));
  MT_OK(metrale_copy_d2h(ctx, a, host, 50));
  MT_OK(metrale_copy_d2h_async(ctx, a, host, 70, NULL));
  MT_OK(metrale_copy_d2d(ctx, a, c, 30));
  MT_OK(metrale_copy_d2d_2d_async(ctx, a, 20, c, 20, 10, 4, NULL));
  MT_OK(metrale_memset(ctx, a, 1, 11));
  MT_OK(metrale_memset_async(ctx, a, 2, 9, NULL));
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, NULL, NULL));
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, NULL, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_free(ctx, c));
  MT_OK(metrale_free(ctx, b));
  metrale_kernel_t* k2 = NULL;
  MT_STATUS(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "absent", &k2), METRALE_ERROR_NOT_FOUND);

  metrale_counters_t got = mt_counters(ctx);
  assert_int_equal(got.struct_size, sizeof got);
  assert_int_equal(got.allocs, 1);
  assert_int_equal(got.alloc_bytes, 500);
  assert_int_equal(got.frees, 2);
  assert_int_equal(got.free_bytes, 524);
  assert_int_equal(got.h2d_copies, 2);
  assert_int_equal(got.h2d_bytes, 300);
  assert_int_equal(got.d2h_copies, 2);
  assert_int_equal(got.d2h_bytes, 120);
  assert_int_equal(got.d2d_copies, 2);
  assert_int_equal(got.d2d_bytes, 30 + 40);
  assert_int_equal(got.memsets, 2);
  assert_int_equal(got.memset_bytes, 20);
  assert_int_equal(got.launches, 2);
  assert_int_equal(got.graph_launches, 0);
  assert_true(got.stream_syncs >= 1);
  assert_int_equal(got.kernel_lookups, 1);
  assert_int_equal(got.kernel_lookup_misses, 1);
  assert_int_equal(got.pinned_source_waits, 0);

  MT_OK(metrale_counters_reset(ctx));
  got = mt_counters(ctx);
  assert_int_equal(got.struct_size, sizeof got);
  assert_int_equal(got.allocs + got.frees + got.h2d_copies + got.d2h_copies + got.d2d_copies +
                       got.memsets + got.launches + got.stream_syncs + got.kernel_lookups +
                       got.h2d_bytes + got.d2h_bytes + got.d2d_bytes + got.memset_bytes,
                   0);
  MT_OK(metrale_free(ctx, a));
  mt_close(ctx);
}

static void counters_struct_size_checked(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_counters_t c;
  memset(&c, 0, sizeof c);
  /* sizeof c - 8 is the older layout, still served (test_races.c). */
  c.struct_size = sizeof c + 8;
  MT_STATUS(metrale_counters(ctx, &c), METRALE_ERROR_INVALID_ARGUMENT);
  c.struct_size = sizeof c - 4;
  MT_STATUS(metrale_counters(ctx, &c), METRALE_ERROR_INVALID_ARGUMENT);
  c.struct_size = 0;
  MT_STATUS(metrale_counters(ctx, &c), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_counters(ctx, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

/* --- launch trace ---------------------------------------------------------- */

static void launch_trace_records_entries(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_alloc(ctx, 256 * 4, &p));
  MT_OK(metrale_alloc(ctx, 256 * 4, &q));
  metrale_kernel_t* fill = mt_kernel(ctx, "fill_u32");
  /* Off: nothing is recorded. */
  MT_OK(metrale_memset_async(ctx, p, 0, 16, NULL));
  size_t n = 99;
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);

  MT_OK(metrale_launch_trace_enable(ctx, 1));
  uint32_t value = 5;
  uint64_t count = 256;
  void* params[] = {&p, &value, &count};
  metrale_dim3_t grid = {2, 1, 1}, block = {128, 1, 1};
  MT_OK(metrale_launch(ctx, fill, grid, block, 16, NULL, params));
  MT_OK(metrale_copy_d2d_async(ctx, p, q, 64, NULL));
  MT_OK(metrale_memset_async(ctx, q, 0x21, 32, NULL));
  MT_OK(metrale_copy_d2d_2d_async(ctx, p, 64, q, 32, 16, 3, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));

  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 4);
  metrale_trace_entry_t e[4];
  memset(e, 0, sizeof e);
  MT_OK(metrale_launch_trace_read(ctx, e, 4, &n));
  assert_int_equal(n, 4);
  assert_int_equal(e[0].kind, METRALE_TRACE_LAUNCH);
  assert_non_null(e[0].kernel);
  assert_string_equal(e[0].kernel, "test_kernels::fill_u32");
  assert_int_equal(e[0].grid.x, 2);
  assert_int_equal(e[0].grid.y, 1);
  assert_int_equal(e[0].block.x, 128);
  assert_int_equal(e[0].shared_bytes, 16);
  assert_int_equal(e[0].nargs, 3);
  assert_int_equal(e[0].args[0], p);
  assert_int_equal(e[0].args[1], 5);
  assert_int_equal(e[0].args[2], 256);
  assert_int_equal(e[1].kind, METRALE_TRACE_D2D);
  assert_null(e[1].kernel);
  assert_int_equal(e[1].args[0], p);
  assert_int_equal(e[1].args[1], q);
  assert_int_equal(e[1].args[2], 64);
  assert_int_equal(e[2].kind, METRALE_TRACE_MEMSET);
  assert_int_equal(e[2].args[0], q);
  assert_int_equal(e[2].args[1], 0x21);
  assert_int_equal(e[2].args[2], 32);
  assert_int_equal(e[3].kind, METRALE_TRACE_D2D);
  assert_int_equal(e[3].args[2], 48);

  /* Short buffer: the first cap entries, BUFFER_TOO_SMALL. */
  metrale_trace_entry_t one;
  MT_STATUS(metrale_launch_trace_read(ctx, &one, 1, &n), METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(n, 4);
  assert_int_equal(one.kind, METRALE_TRACE_LAUNCH);

  /* Off stops recording; on again clears. */
  MT_OK(metrale_launch_trace_enable(ctx, 0));
  MT_OK(metrale_memset_async(ctx, q, 0, 16, NULL));
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 4);
  MT_OK(metrale_launch_trace_enable(ctx, 1));
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);

  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_free(ctx, q));
  mt_close(ctx);
}

static void launch_trace_packed_args(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, 7 * 8, &out));
  unsigned char args[48];
  memset(args, 0, sizeof args);
  uint8_t a = 3;
  uint16_t b = 4;
  uint32_t c = 5;
  uint64_t d = 6;
  int8_t g = -1;
  memcpy(args + 0, &a, 1);
  memcpy(args + 2, &b, 2);
  memcpy(args + 4, &c, 4);
  memcpy(args + 8, &d, 8);
  memcpy(args + 32, &g, 1);
  memcpy(args + 40, &out, 8);
  MT_OK(metrale_launch_trace_enable(ctx, 1));
  MT_OK(metrale_launch_packed(ctx, mt_kernel(ctx, "mixed_params"), ONE, ONE, 0, NULL, args, 48));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  metrale_trace_entry_t e;
  size_t n = 0;
  MT_OK(metrale_launch_trace_read(ctx, &e, 1, &n));
  assert_int_equal(n, 1);
  assert_string_equal(e.kernel, "test_kernels::mixed_params");
  /* Sizes are known on both backends: each parameter widened. */
  assert_int_equal(e.nargs, 8);
  assert_int_equal(e.args[0], 3);
  assert_int_equal(e.args[1], 4);
  assert_int_equal(e.args[2], 5);
  assert_int_equal(e.args[3], 6);
  assert_int_equal(e.args[7], out);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void trace_capacity_keeps_newest(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.trace_capacity = 4;
  o.launch_trace = 1;
  metrale_context_t* ctx = mt_open(&o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  for (uint8_t v = 1; v <= 6; ++v) MT_OK(metrale_memset_async(ctx, p, v, 8, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  metrale_trace_entry_t e[4];
  size_t n = 0;
  MT_OK(metrale_launch_trace_read(ctx, e, 4, &n));
  assert_int_equal(n, 4);
  for (int i = 0; i < 4; ++i) assert_int_equal(e[i].args[1], (uint64_t)(i + 3));
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* Rule 6: a trace capacity past METRALE_TRACE_CAPACITY_MAX is refused at
 * create (it would let the trace grow without bound); the bound itself is
 * accepted (the trace grows as entries come). */
static void trace_capacity_is_bounded(void** state) {
  (void)state;
  const size_t asked[] = {SIZE_MAX, (size_t)METRALE_TRACE_CAPACITY_MAX + 1};
  for (size_t i = 0; i < sizeof asked / sizeof asked[0]; ++i) {
    metrale_context_options_t o = mt_options();
    o.trace_capacity = asked[i];
    metrale_context_t* ctx = NULL;
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
    assert_non_null(strstr(metrale_last_error_message(), "METRALE_TRACE_CAPACITY_MAX"));
  }
  metrale_context_options_t o = mt_options();
  o.trace_capacity = METRALE_TRACE_CAPACITY_MAX;
  o.launch_trace = 1;
  metrale_context_t* ctx = mt_open(&o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  MT_OK(metrale_memset_async(ctx, p, 7, 8, NULL));
  size_t n = 0;
  MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static int g_ring_drops; /* warnings of a dropped trace entry */

static void count_ring_drops(metrale_log_level_t level, const char* message, void* user) {
  (void)user;
  if (level == METRALE_LOG_WARN && message != NULL && strstr(message, "has no memory to grow"))
    __atomic_add_fetch(&g_ring_drops, 1, __ATOMIC_SEQ_CST);
}

/* Rule 1 with the trace on: a traced memset and a traced launch whose
 * allocations fail in turn either fail having done nothing (the memory,
 * the counters and the trace as they were) or succeed in full. The trace
 * entry is made last: a trace short of memory must not turn a call that
 * acted into a failure. Each try opens a context, so that the trace's
 * first entry allocates. */
static void a_traced_call_short_of_memory_acts_in_full_or_not_at_all(void** state) {
  (void)state;
  if (mt_under_valgrind()) skip(); /* operator new is valgrind's there */
  assert_true(mt_fail_new_works());
  metrale_context_t* probe = mt_open(NULL);
  const int host = mt_is_host(probe);
  mt_close(probe);
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(count_ring_drops, NULL));
  for (int launch = 0; launch <= 1; ++launch) {
    int dropped = 0;
    int done = 0;
    for (int n = 1; n <= 200 && !done; ++n) {
      metrale_context_options_t o = mt_options();
      o.launch_trace = 1;
      metrale_context_t* ctx = mt_open(&o);
      metrale_kernel_t* k = NULL;
      if (launch) {
        mt_load_kernels(ctx);
        k = mt_kernel(ctx, "fill_u32");
      }
      metrale_devptr_t p = 0;
      MT_OK(metrale_alloc(ctx, 64, &p));
      MT_OK(metrale_memset(ctx, p, 0, 64));
      MT_OK(metrale_counters_reset(ctx));
      uint32_t value = 0x01010101u;
      uint64_t count = 2;
      void* params[] = {&p, &value, &count};
      const metrale_dim3_t threads = {256, 1, 1};
      __atomic_store_n(&g_ring_drops, 0, __ATOMIC_SEQ_CST);
      mt_fail_new_after(n);
      const metrale_status_t st = launch ? metrale_launch(ctx, k, ONE, threads, 0, NULL, params)
                                         : metrale_memset_async(ctx, p, 1, 8, NULL);
      const long left = mt_fail_new_left();
      mt_fail_new_after(0);
      MT_OK(metrale_stream_synchronize(ctx, NULL));
      unsigned char host[8];
      MT_OK(metrale_copy_d2h(ctx, p, host, sizeof host));
      const metrale_counters_t c = mt_counters(ctx);
      size_t traced = 0;
      MT_OK(metrale_launch_trace_read(ctx, NULL, 0, &traced));
      const uint64_t acted = launch ? c.launches : c.memsets;
      if (st == METRALE_OK) {
        if (host[0] != 1 || acted != 1)
          fail_msg("%s, n=%d: OK but byte 0 is %u and the counter %llu", launch ? "launch" : "memset",
                   n, host[0], (unsigned long long)acted);
        /* An entry with no memory is dropped, and that is logged. */
        if (traced != 1) {
          assert_int_equal(traced, 0);
          assert_int_equal(__atomic_load_n(&g_ring_drops, __ATOMIC_SEQ_CST), 1);
          dropped++;
        }
        done = left != 0; /* no allocation failed: every one was tried */
      } else {
        if (st != METRALE_ERROR_OUT_OF_MEMORY)
          fail_msg("%s, n=%d: %s", launch ? "launch" : "memset", n, metrale_last_error_message());
        if (host[0] != 0 || acted != 0 || traced != 0)
          fail_msg("%s, n=%d: failed (%s) but byte 0 is %u, the counter %llu, the trace %zu",
                   launch ? "launch" : "memset", n, metrale_last_error_message(), host[0],
                   (unsigned long long)acted, traced);
      }
      MT_OK(metrale_free(ctx, p));
      mt_close(ctx);
    }
    assert_true(done);
    /* The trace's allocation was among those failed. On the host backend a
     * call's allocations are the library's alone; on cuda this was not
     * reached on an H100 (the cause is not established), so there only the
     * rule-1 checks above hold the case. */
    if (host) {
      assert_true(dropped > 0);
    } else if (dropped == 0) {
      print_message("note: %s: no dropped trace entry reached on this backend\n",
                    launch ? "launch" : "memset");
    }
  }
  MT_OK(metrale_log_set_callback(NULL, NULL));
}

/* --- kernel audit and timings ------------------------------------------------ */

static void kernel_audit_size_query(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "fill_u32", &k));
  MT_OK(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "add_f32", &k));
  MT_STATUS(metrale_kernel_get(ctx, "x", "y", &k), METRALE_ERROR_NOT_FOUND);
  size_t n = 0;
  MT_OK(metrale_kernel_audit_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 3);
  metrale_kernel_audit_entry_t e[2];
  MT_STATUS(metrale_kernel_audit_read(ctx, e, 2, &n), METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(n, 3);
  assert_string_equal(e[0].function, "fill_u32");
  assert_string_equal(e[1].function, "add_f32");
  mt_close(ctx);
}

static void kernel_timings_per_kernel(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  MT_OK(metrale_kernel_timing_enable(ctx, 1));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 256 * 4, &p));
  for (int i = 0; i < 3; ++i) MT_OK(mt_fill_u32(ctx, NULL, p, (uint32_t)i, 256));
  metrale_kernel_t* empty = mt_kernel(ctx, "empty_kernel");
  MT_OK(metrale_launch(ctx, empty, ONE, ONE, 0, NULL, NULL));
  size_t n = 0;
  MT_OK(metrale_kernel_timings_read(ctx, NULL, 0, &n));
  assert_int_equal(n, 2);
  metrale_kernel_timing_t t[2];
  MT_OK(metrale_kernel_timings_read(ctx, t, 2, &n));
  assert_string_equal(t[0].kernel, "test_kernels::fill_u32");
  assert_int_equal(t[0].launches, 3);
  assert_true(t[0].total_ms >= 0.0);
  assert_string_equal(t[1].kernel, "test_kernels::empty_kernel");
  assert_int_equal(t[1].launches, 1);
  metrale_kernel_timing_t one;
  MT_STATUS(metrale_kernel_timings_read(ctx, &one, 1, &n), METRALE_ERROR_BUFFER_TOO_SMALL);
  /* Off: launches are no longer timed. */
  MT_OK(metrale_kernel_timing_enable(ctx, 0));
  MT_OK(metrale_launch(ctx, empty, ONE, ONE, 0, NULL, NULL));
  MT_OK(metrale_kernel_timings_read(ctx, t, 2, &n));
  assert_int_equal(t[1].launches, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(counters_follow_operations),
      cmocka_unit_test(counters_struct_size_checked),
      cmocka_unit_test(launch_trace_records_entries),
      cmocka_unit_test(launch_trace_packed_args),
      cmocka_unit_test(trace_capacity_keeps_newest),
      cmocka_unit_test(trace_capacity_is_bounded),
      cmocka_unit_test(a_traced_call_short_of_memory_acts_in_full_or_not_at_all),
      cmocka_unit_test(kernel_audit_size_query),
      cmocka_unit_test(kernel_timings_per_kernel),
  };
  return MT_RUN(tests);
}
