/* Context options, environment overrides, creation, backend query, thread
 * binding, fault query and destruction. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

/* --- options ------------------------------------------------------------- */

static void options_init_gives_defaults(void** state) {
  (void)state;
  metrale_context_options_t o;
  memset(&o, 0x5A, sizeof o);
  MT_OK(metrale_context_options_init(&o));
  assert_int_equal(o.struct_size, sizeof o);
  assert_int_equal(o.backend, METRALE_BACKEND_AUTO);
  assert_int_equal(o.device, 0);
  assert_int_equal(o.redzone_bytes, 0);
  assert_int_equal(o.redzone_min_index, 0);
  assert_int_equal(o.checked_pointers, 0);
  assert_int_equal(o.debug_sync, 0);
  assert_int_equal(o.launch_trace, 0);
  assert_int_equal(o.kernel_timing, 0);
  assert_int_equal(o.trace_capacity, 65536);
}

static void options_init_null_is_invalid(void** state) {
  (void)state;
  MT_STATUS(metrale_context_options_init(NULL), METRALE_ERROR_INVALID_ARGUMENT);
}

static void unknown_struct_size_is_invalid(void** state) {
  (void)state;
  const size_t sizes[] = {0, 1, sizeof(size_t), sizeof(metrale_context_options_t) + 64};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; ++i) {
    metrale_context_options_t o = mt_options();
    o.struct_size = sizes[i];
    metrale_context_t* sentinel = (metrale_context_t*)&o;
    metrale_context_t* ctx = sentinel;
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    assert_ptr_equal(ctx, sentinel); /* out written only on OK */
  }
}

static void create_null_out_is_invalid(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  MT_STATUS(metrale_context_create(&o, NULL), METRALE_ERROR_INVALID_ARGUMENT);
}

static void create_with_null_options_uses_defaults(void** state) {
  (void)state;
  metrale_context_t* ctx = NULL;
  MT_OK(metrale_context_create(NULL, &ctx));
  assert_non_null(ctx);
  metrale_backend_t b = metrale_context_backend(ctx);
  /* AUTO resolves to a real backend. */
  assert_true(b == METRALE_BACKEND_CUDA || b == METRALE_BACKEND_HOST);
  mt_close(ctx);
}

static void explicit_backend_is_honoured(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  assert_int_equal(metrale_context_backend(ctx), mt_backend());
  mt_close(ctx);
}

static void backend_of_null_is_auto(void** state) {
  (void)state;
  assert_int_equal(metrale_context_backend(NULL), METRALE_BACKEND_AUTO);
}

static void two_contexts_are_independent(void** state) {
  (void)state;
  metrale_context_t* a = mt_open(NULL);
  metrale_context_t* b = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(a, 64, &p));
  mt_ledger_t lb = mt_ledger(b);
  assert_int_equal(lb.count, 0);
  assert_int_equal(mt_ledger(a).count, 1);
  /* b does not know a's pointer. */
  MT_STATUS(metrale_free(b, p), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_free(a, p));
  mt_close(b);
  mt_close(a);
}

/* --- environment --------------------------------------------------------- */

/* Creates a context with `name=value` set, then unsets it. */
static metrale_status_t create_with_env(const char* name, const char* value,
                                        const metrale_context_options_t* opts,
                                        metrale_context_t** out) {
  setenv(name, value, 1);
  metrale_status_t s = metrale_context_create(opts, out);
  unsetenv(name);
  return s;
}

static metrale_context_t* open_with_env(const char* name, const char* value,
                                        const metrale_context_options_t* opts) {
  metrale_context_options_t o = opts ? *opts : mt_options();
  setenv(name, value, 1);
  metrale_context_t* ctx = NULL;
  metrale_status_t s = metrale_context_create(&o, &ctx);
  unsetenv(name);
  if ((s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) &&
      o.backend == METRALE_BACKEND_CUDA) {
    print_message("skip: cuda backend unavailable: %s\n", metrale_last_error_message());
    skip();
  }
  MT_STATUS(s, METRALE_OK);
  return ctx;
}

static void malformed_env_values_are_invalid(void** state) {
  (void)state;
  static const struct {
    const char* name;
    const char* value;
  } table[] = {
      {"METRALE_BACKEND", "gpu"},         {"METRALE_BACKEND", "cudax"},
      {"METRALE_DEVICE", "abc"},          {"METRALE_DEVICE", "1x"},
      {"METRALE_REDZONE", "lots"},        {"METRALE_REDZONE", "-5"},
      {"METRALE_REDZONE", "64k"},         {"METRALE_REDZONE_MIN_IDX", "x"},
      {"METRALE_CHECKED", "yes"},         {"METRALE_DEBUG_SYNC", "maybe"},
      {"METRALE_LAUNCH_TRACE", "on"},     {"METRALE_KERNEL_TIMING", "true"},
      {"METRALE_LOG", "loud"},
  };
  for (size_t i = 0; i < sizeof table / sizeof table[0]; ++i) {
    metrale_context_options_t o = mt_options();
    metrale_context_t* ctx = NULL;
    metrale_status_t s = create_with_env(table[i].name, table[i].value, &o, &ctx);
    if (s != METRALE_ERROR_INVALID_ARGUMENT) {
      print_error("%s=\"%s\": got %s, expected METRALE_ERROR_INVALID_ARGUMENT\n", table[i].name,
                  table[i].value, metrale_status_name(s));
      if (s == METRALE_OK) metrale_context_destroy(ctx);
      fail();
    }
    assert_null(ctx);
    MT_MESSAGE_HAS(table[i].name);
  }
}

static void env_backend_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.backend = METRALE_BACKEND_CUDA; /* the variable wins, so no GPU is needed */
  metrale_context_t* ctx = open_with_env("METRALE_BACKEND", "host", &o);
  assert_int_equal(metrale_context_backend(ctx), METRALE_BACKEND_HOST);
  mt_close(ctx);
}

static void env_redzone_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 0;
  metrale_context_t* ctx = open_with_env("METRALE_REDZONE", "64", &o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 100, &p));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  assert_int_equal(n, 1);
  assert_int_equal(a.redzone_bytes, 64);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_redzone_min_index_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 32;
  o.redzone_min_index = 0;
  metrale_context_t* ctx = open_with_env("METRALE_REDZONE_MIN_IDX", "1", &o);
  metrale_devptr_t p[2];
  MT_OK(metrale_alloc(ctx, 16, &p[0]));
  MT_OK(metrale_alloc(ctx, 16, &p[1]));
  metrale_allocation_t a[2];
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, a, 2, &n));
  assert_int_equal(n, 2);
  assert_int_equal(a[0].seq, 0);
  assert_int_equal(a[0].redzone_bytes, 0);
  assert_int_equal(a[1].seq, 1);
  assert_int_equal(a[1].redzone_bytes, 32);
  MT_OK(metrale_free(ctx, p[0]));
  MT_OK(metrale_free(ctx, p[1]));
  mt_close(ctx);
}

static void env_checked_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 0;
  metrale_context_t* ctx = open_with_env("METRALE_CHECKED", "1", &o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  char buf[128] = {0};
  MT_STATUS(metrale_copy_h2d(ctx, buf, 128, p), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_checked_zero_turns_checks_off(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.checked_pointers = 1;
  o.redzone_bytes = 64; /* the byte past the buffer is pad, so writing it is safe */
  metrale_context_t* ctx = open_with_env("METRALE_CHECKED", "0", &o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  char buf[65];
  memset(buf, 0x11, sizeof buf);
  /* Unchecked, a copy one byte past the buffer goes through ... */
  MT_OK(metrale_copy_h2d(ctx, buf, 65, p));
  /* ... and lands in the pad. */
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_launch_trace_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.launch_trace = 0;
  metrale_context_t* ctx = open_with_env("METRALE_LAUNCH_TRACE", "1", &o);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  MT_OK(metrale_memset_async(ctx, p, 7, 64, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  metrale_trace_entry_t e[4];
  size_t n = 0;
  MT_OK(metrale_launch_trace_read(ctx, e, 4, &n));
  assert_int_equal(n, 1);
  assert_int_equal(e[0].kind, METRALE_TRACE_MEMSET);
  assert_int_equal(e[0].args[0], p);
  assert_int_equal(e[0].args[1], 7);
  assert_int_equal(e[0].args[2], 64);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_kernel_timing_overrides_options(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.kernel_timing = 0;
  metrale_context_t* ctx = open_with_env("METRALE_KERNEL_TIMING", "1", &o);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64 * 4, &p));
  MT_OK(mt_fill_u32(ctx, NULL, p, 3, 64));
  metrale_kernel_timing_t t[4];
  size_t n = 0;
  MT_OK(metrale_kernel_timings_read(ctx, t, 4, &n));
  assert_int_equal(n, 1);
  assert_string_equal(t[0].kernel, "test_kernels::fill_u32");
  assert_int_equal(t[0].launches, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_debug_sync_accepts_values(void** state) {
  (void)state;
  metrale_context_t* ctx = open_with_env("METRALE_DEBUG_SYNC", "1", NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 16 * 4, &p));
  MT_OK(mt_fill_u32(ctx, NULL, p, 9, 16));
  uint32_t* got = mt_read_device(ctx, p, 16 * 4);
  for (int i = 0; i < 16; ++i) assert_int_equal(got[i], 9);
  free(got);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void env_log_level_is_accepted(void** state) {
  (void)state;
  metrale_context_t* ctx = open_with_env("METRALE_LOG", "off", NULL);
  mt_close(ctx);
  ctx = open_with_env("METRALE_LOG", "warn", NULL);
  mt_close(ctx);
}

/* --- device queries ------------------------------------------------------ */

static void device_info_describes_backend(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_device_info_t info;
  memset(&info, 0, sizeof info);
  MT_OK(metrale_device_info(ctx, &info));
  assert_int_equal(info.backend, metrale_context_backend(ctx));
  assert_true(strlen(info.name) > 0 && strlen(info.name) < sizeof info.name);
  assert_true(info.sm_count >= 1);
  assert_true(info.total_memory > 0);
  assert_int_equal(info.ordinal, 0);
  if (mt_is_host(ctx)) {
    assert_int_equal(info.compute_major, 0);
    assert_int_equal(info.compute_minor, 0);
  } else {
    assert_true(info.compute_major >= 7);
  }
  size_t total = 0, free_b = 0, dev_free = 0;
  MT_OK(metrale_total_memory(ctx, &total));
  MT_OK(metrale_free_memory(ctx, &free_b));
  MT_OK(metrale_device_free_memory(ctx, &dev_free));
  assert_int_equal(total, info.total_memory);
  assert_true(dev_free <= total);
  assert_true(free_b > 0);
  mt_close(ctx);
}

/* --- threads and faults -------------------------------------------------- */

static void* bind_on_thread(void* arg) {
  metrale_context_t* ctx = arg;
  metrale_status_t s = metrale_context_bind_thread(ctx);
  metrale_devptr_t p = 0;
  if (s == METRALE_OK) s = metrale_alloc(ctx, 32, &p);
  if (s == METRALE_OK) s = metrale_free(ctx, p);
  return (void*)(intptr_t)s;
}

static void bind_thread_works_anywhere(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_context_bind_thread(ctx));
  pthread_t t;
  void* rc = (void*)1;
  assert_int_equal(pthread_create(&t, NULL, bind_on_thread, ctx), 0);
  assert_int_equal(pthread_join(t, &rc), 0);
  assert_int_equal((intptr_t)rc, METRALE_OK);
  mt_close(ctx);
}

static void fault_on_healthy_context_is_ok(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_context_fault(ctx));
  mt_close(ctx);
}

/* --- destroy ------------------------------------------------------------- */

static void destroy_null_is_ok(void** state) {
  (void)state;
  MT_OK(metrale_context_destroy(NULL));
}

typedef struct {
  int warn_lines_naming_site;
} log_capture_t;

static void capture_log(metrale_log_level_t level, const char* message, void* user) {
  log_capture_t* c = user;
  if (level >= METRALE_LOG_WARN && strstr(message, "leftover_site.c") != NULL)
    c->warn_lines_naming_site++;
}

static void destroy_sweeps_leftovers(void** state) {
  (void)state;
  log_capture_t cap = {0};
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p[3];
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc_at(ctx, 1000 + i, "leftover_site.c", 99, &p[i]));
  metrale_devptr_t m = 0;
  MT_OK(metrale_alloc_managed(ctx, 128, &m));
  metrale_stream_t* s = NULL;
  metrale_event_t* e = NULL;
  void* pinned = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  MT_OK(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &e));
  MT_OK(metrale_event_record(ctx, e, s));
  MT_OK(metrale_host_alloc_pinned(ctx, 4096, &pinned));
  MT_OK(metrale_graph_begin_capture(ctx, s));
  MT_OK(metrale_memset_async(ctx, p[0], 1, 16, s));
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(ctx, s, &g));

  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(metrale_log_set_callback(capture_log, &cap));
  metrale_status_t st = metrale_context_destroy(ctx);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_log_set_level(METRALE_LOG_INFO));
  MT_STATUS(st, METRALE_OK);
  assert_true(cap.warn_lines_naming_site >= 1);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(options_init_gives_defaults),
      cmocka_unit_test(options_init_null_is_invalid),
      cmocka_unit_test(unknown_struct_size_is_invalid),
      cmocka_unit_test(create_null_out_is_invalid),
      cmocka_unit_test(create_with_null_options_uses_defaults),
      cmocka_unit_test(explicit_backend_is_honoured),
      cmocka_unit_test(backend_of_null_is_auto),
      cmocka_unit_test(two_contexts_are_independent),
      cmocka_unit_test(malformed_env_values_are_invalid),
      cmocka_unit_test(env_backend_overrides_options),
      cmocka_unit_test(env_redzone_overrides_options),
      cmocka_unit_test(env_redzone_min_index_overrides_options),
      cmocka_unit_test(env_checked_overrides_options),
      cmocka_unit_test(env_checked_zero_turns_checks_off),
      cmocka_unit_test(env_launch_trace_overrides_options),
      cmocka_unit_test(env_kernel_timing_overrides_options),
      cmocka_unit_test(env_debug_sync_accepts_values),
      cmocka_unit_test(env_log_level_is_accepted),
      cmocka_unit_test(device_info_describes_backend),
      cmocka_unit_test(bind_thread_works_anywhere),
      cmocka_unit_test(fault_on_healthy_context_is_ok),
      cmocka_unit_test(destroy_null_is_ok),
      cmocka_unit_test(destroy_sweeps_leftovers),
  };
  return MT_RUN(tests);
}
