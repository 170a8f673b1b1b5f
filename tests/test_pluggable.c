/* libmetrale_gpu_pluggable: PyTorch's pluggable-allocator entry points over
 * one process-wide context per device. The library's state is process-wide,
 * so the cases run in order: configure first, then everything else. */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "metrale_gpu_pluggable.h"
#include "test_support.h"

static metrale_context_t* device0(void) {
  metrale_context_t* ctx = NULL;
  MT_OK(metrale_pluggable_context(0, &ctx));
  assert_non_null(ctx);
  return ctx;
}

static metrale_allocation_t entry_of(metrale_context_t* ctx, void* p) {
  metrale_allocation_t all[64];
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, all, 64, &n));
  for (size_t i = 0; i < n; ++i) {
    if (all[i].ptr == (metrale_devptr_t)(uintptr_t)p) return all[i];
  }
  fail_msg("%p is not on the ledger", p);
  return all[0];
}

static void configure_first(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.struct_size = 3; /* no layout */
  assert_int_equal(metrale_pluggable_configure(&o), METRALE_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "struct_size"));
  o = mt_options();
  o.redzone_bytes = 64;
  o.pool = 1;
  assert_int_equal(metrale_pluggable_configure(&o), METRALE_OK);
}

static void alloc_free_round_trip(void** state) {
  (void)state;
  void* p = metrale_pluggable_alloc(1000, 0, NULL);
  assert_non_null(p);
  metrale_context_t* ctx = device0();
  assert_int_equal(mt_ledger(ctx).count, 1);
  metrale_allocation_t e = entry_of(ctx, p);
  assert_int_equal(e.bytes, 1000);
  assert_int_equal(e.redzone_bytes, 64); /* the configured options */
  assert_string_equal(e.file, "<pluggable allocator>");
  /* The memory is usable. */
  uint8_t in[1000], out[1000];
  memset(in, 0x5a, sizeof in);
  MT_OK(metrale_copy_h2d(ctx, in, sizeof in, (metrale_devptr_t)(uintptr_t)p));
  MT_OK(metrale_copy_d2h(ctx, (metrale_devptr_t)(uintptr_t)p, out, sizeof out));
  assert_memory_equal(in, out, sizeof in);
  metrale_pluggable_free(p, 1000, 0, NULL);
  assert_int_equal(mt_ledger(ctx).count, 0);
  /* The same context every time. */
  assert_ptr_equal(device0(), ctx);
}

static void configure_after_first_use_is_refused(void** state) {
  (void)state;
  assert_int_equal(metrale_pluggable_configure(NULL), METRALE_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "too late"));
  /* Still the configured red zones. */
  void* p = metrale_pluggable_alloc(64, 0, NULL);
  assert_int_equal(entry_of(device0(), p).redzone_bytes, 64);
  metrale_pluggable_free(p, 64, 0, NULL);
}

static void bad_requests_return_null(void** state) {
  (void)state;
  metrale_context_t* ctx = device0();
  size_t before = mt_ledger(ctx).count;
  assert_null(metrale_pluggable_alloc(0, 0, NULL)); /* as torch's own allocator */
  assert_null(metrale_pluggable_alloc(-1, 0, NULL));
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "negative"));
  assert_null(metrale_pluggable_alloc(16, -1, NULL));
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "device"));
  assert_null(metrale_pluggable_alloc(16, METRALE_PLUGGABLE_MAX_DEVICES, NULL));
  assert_null(metrale_pluggable_alloc((ssize_t)(SIZE_MAX >> 1), 0, NULL)); /* out of memory */
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "out of"));
  assert_int_equal(mt_ledger(ctx).count, before);
  metrale_context_t* none = NULL;
  assert_int_equal(metrale_pluggable_context(0, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(metrale_pluggable_context(-3, &none), METRALE_ERROR_INVALID_ARGUMENT);
  assert_null(none);
}

static void bad_frees_free_nothing(void** state) {
  (void)state;
  metrale_context_t* ctx = device0();
  void* p = metrale_pluggable_alloc(256, 0, NULL);
  metrale_pluggable_free(NULL, 0, 0, NULL); /* no-op */
  metrale_pluggable_free((char*)p + 8, 256, 0, NULL); /* interior */
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "inside the allocation"));
  metrale_pluggable_free((void*)(uintptr_t)0x10, 16, 0, NULL); /* never allocated */
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "not a live allocation"));
  metrale_pluggable_free(p, 256, 7, NULL); /* a device without a context */
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "no context"));
  metrale_pluggable_free(p, 256, -1, NULL);
  assert_int_equal(mt_ledger(ctx).count, 1);
  metrale_pluggable_free(p, 256, 0, NULL);
  metrale_pluggable_free(p, 256, 0, NULL); /* twice: refused, logged */
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "not a live allocation"));
  assert_int_equal(mt_ledger(ctx).count, 0);
}

/* A framework may free its tensors at thread exit from a pthread key
 * destructor, which runs after the thread's C++ thread_local objects were
 * destroyed: a refused free there still gets its message, and the thread's
 * earlier message left nothing behind to write through (it was a destroyed
 * std::string: "double free detected", or a write into freed memory). */
static pthread_key_t exit_key;
static char exit_message[512];

static void free_at_thread_exit(void* value) {
  (void)value;
  /* Longer than the thread's message before: the storage grows. */
  metrale_pluggable_free((void*)(uintptr_t)0x10, 16, 0, NULL);
  snprintf(exit_message, sizeof exit_message, "%s", metrale_pluggable_last_error_message());
}

static void* refuse_then_exit(void* arg) {
  (void)arg;
  assert_null(metrale_pluggable_alloc(-1, 0, NULL)); /* a message of this thread's */
  pthread_setspecific(exit_key, (void*)1);
  return NULL;
}

static void refused_free_at_thread_exit_has_its_message(void** state) {
  (void)state;
  (void)device0();
  exit_message[0] = '\0';
  assert_int_equal(pthread_key_create(&exit_key, free_at_thread_exit), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, refuse_then_exit, NULL), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  pthread_key_delete(exit_key);
  assert_non_null(strstr(exit_message, "not a live allocation"));
}

/* On the host backend only NULL names a stream (a stream of its own). */
static void native_streams_on_host(void** state) {
  (void)state;
  mt_require_host(device0());
  assert_null(metrale_pluggable_alloc(64, 0, (void*)(uintptr_t)0x1234));
  assert_non_null(strstr(metrale_pluggable_last_error_message(), "native"));
}

/* Freed on its stream, a block is the next allocation's on that stream. */
static void freed_block_is_reused_on_its_stream(void** state) {
  (void)state;
  /* METRALE_POOL=0 (CI's pool-off pass) overrides the configured pool. */
  if (!mt_pool_on(device0())) skip();
  void* p = metrale_pluggable_alloc(4096, 0, NULL);
  metrale_pluggable_free(p, 4096, 0, NULL);
  /* With red zones (this suite's options) the freed block waits for its
   * red-zone check, which a scan runs, before it is reused. */
  size_t n = 0;
  MT_OK(metrale_redzone_scan(device0(), NULL, 0, &n));
  void* q = metrale_pluggable_alloc(4096, 0, NULL);
  metrale_pluggable_free(q, 4096, 0, NULL);
  assert_ptr_equal(p, q);
}

static void allocations_carry_the_tag(void** state) {
  (void)state;
  MT_OK(metrale_tag_push("decoder.block0"));
  void* p = metrale_pluggable_alloc(512, 0, NULL);
  MT_OK(metrale_tag_pop());
  const char* tag = NULL;
  MT_OK(metrale_allocation_tag(device0(), (metrale_devptr_t)(uintptr_t)p, &tag));
  assert_string_equal(tag, "decoder.block0");
  metrale_pluggable_free(p, 512, 0, NULL);
}

static int site_calls;
static metrale_status_t nested_set;

static int python_like_site(char* file, size_t cap, int* line, void* user) {
  ++site_calls;
  nested_set = metrale_pluggable_set_site_fn(NULL, NULL); /* refused from inside */
  snprintf(file, cap, "%s", (const char*)user);
  *line = 42;
  return 1;
}

static int no_site(char* file, size_t cap, int* line, void* user) {
  (void)file;
  (void)cap;
  (void)line;
  (void)user;
  ++site_calls;
  return 0;
}

static void site_function_names_the_site(void** state) {
  (void)state;
  metrale_context_t* ctx = device0();
  char model[] = "train.py";
  MT_OK(metrale_pluggable_set_site_fn(python_like_site, model));
  site_calls = 0;
  void* p = metrale_pluggable_alloc(128, 0, NULL);
  assert_int_equal(site_calls, 1);
  assert_int_equal(nested_set, METRALE_ERROR_INVALID_ARGUMENT);
  metrale_allocation_t e = entry_of(ctx, p);
  assert_string_equal(e.file, "train.py");
  assert_int_equal(e.line, 42);
  metrale_pluggable_free(p, 128, 0, NULL);
  /* 0 from the function: the default site. */
  MT_OK(metrale_pluggable_set_site_fn(no_site, NULL));
  p = metrale_pluggable_alloc(128, 0, NULL);
  assert_int_equal(site_calls, 2);
  assert_string_equal(entry_of(ctx, p).file, "<pluggable allocator>");
  metrale_pluggable_free(p, 128, 0, NULL);
  /* Cleared: not called any more. */
  MT_OK(metrale_pluggable_set_site_fn(NULL, NULL));
  p = metrale_pluggable_alloc(128, 0, NULL);
  assert_int_equal(site_calls, 2);
  metrale_pluggable_free(p, 128, 0, NULL);
}

/* Contexts of other devices are created on their first use (on the host
 * backend, ordinals below METRALE_HOST_DEVICES). */
static void second_device_gets_its_own_context(void** state) {
  (void)state;
  if (!mt_is_host(device0())) skip(); /* needs a second GPU */
  setenv("METRALE_HOST_DEVICES", "4", 1); /* read when device 3's context is made */
  void* p = metrale_pluggable_alloc(64, 3, NULL);
  assert_non_null(p);
  metrale_context_t* c3 = NULL;
  MT_OK(metrale_pluggable_context(3, &c3));
  assert_ptr_not_equal(c3, device0());
  assert_int_equal(mt_ledger(c3).count, 1);
  metrale_pluggable_free(p, 64, 0, NULL); /* wrong device: not there */
  assert_int_equal(mt_ledger(c3).count, 1);
  metrale_pluggable_free(p, 64, 3, NULL);
  assert_int_equal(mt_ledger(c3).count, 0);
}

static void* churn(void* arg) {
  (void)arg;
  void* held[16] = {0};
  for (int i = 0; i < 2000; ++i) {
    int k = i % 16;
    if (held[k] != NULL) metrale_pluggable_free(held[k], 0, 0, NULL);
    held[k] = metrale_pluggable_alloc(64 + (i % 7) * 1000, 0, NULL);
    if (held[k] == NULL) return (void*)1;
  }
  for (int k = 0; k < 16; ++k) metrale_pluggable_free(held[k], 0, 0, NULL);
  return NULL;
}

static void threads_share_the_context(void** state) {
  (void)state;
  pthread_t t[8];
  for (int i = 0; i < 8; ++i) assert_int_equal(pthread_create(&t[i], NULL, churn, NULL), 0);
  for (int i = 0; i < 8; ++i) {
    void* r = NULL;
    assert_int_equal(pthread_join(t[i], &r), 0);
    assert_null(r);
  }
  assert_int_equal(mt_ledger(device0()).count, 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(configure_first),
      cmocka_unit_test(alloc_free_round_trip),
      cmocka_unit_test(configure_after_first_use_is_refused),
      cmocka_unit_test(bad_requests_return_null),
      cmocka_unit_test(bad_frees_free_nothing),
      cmocka_unit_test(refused_free_at_thread_exit_has_its_message),
      cmocka_unit_test(native_streams_on_host),
      cmocka_unit_test(freed_block_is_reused_on_its_stream),
      cmocka_unit_test(allocations_carry_the_tag),
      cmocka_unit_test(site_function_names_the_site),
      cmocka_unit_test(second_device_gets_its_own_context),
      cmocka_unit_test(threads_share_the_context),
  };
  return MT_RUN(tests);
}
