/* Several devices in one process: metrale_device_count, contexts on several
 * devices at once, the per-device ledger (metrale_device_live) and the
 * process-wide report (metrale_alloc_report_all). The host backend
 * simulates METRALE_HOST_DEVICES devices (main sets 4 unless the caller set
 * it); on cuda the cases that need two devices skip where one is present. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

static int device_count(void) {
  int n = 0;
  MT_OK(metrale_device_count(mt_backend(), &n));
  return n;
}

/* A context on device d of the test backend. */
static metrale_context_t* open_on(int d) {
  metrale_context_options_t o = mt_options();
  o.device = d;
  return mt_open(&o);
}

static void need_devices(int n) {
  const int have = device_count();
  if (have < n) {
    print_message("skip: %d devices needed, the %s backend has %d\n", n, mt_backend_name(), have);
    skip();
  }
}

/* Sets or unsets an environment variable, returning the old value (freed by
 * restore_env). */
static char* swap_env(const char* var, const char* value) {
  const char* old = getenv(var);
  char* saved = old != NULL ? strdup(old) : NULL;
  if (value != NULL) setenv(var, value, 1);
  else unsetenv(var);
  return saved;
}

static void restore_env(const char* var, char* saved) {
  if (saved != NULL) setenv(var, saved, 1);
  else unsetenv(var);
  free(saved);
}

static void host_device_count_follows_the_variable(void** state) {
  (void)state;
  char* saved = swap_env("METRALE_HOST_DEVICES", NULL);
  char* saved_backend = swap_env("METRALE_BACKEND", NULL);
  int n = -1;
  MT_OK(metrale_device_count(METRALE_BACKEND_HOST, &n));
  assert_int_equal(n, 1);
  setenv("METRALE_HOST_DEVICES", "3", 1);
  MT_OK(metrale_device_count(METRALE_BACKEND_HOST, &n));
  assert_int_equal(n, 3);
  /* METRALE_BACKEND overrides the argument, as at create. */
  setenv("METRALE_BACKEND", "host", 1);
  MT_OK(metrale_device_count(METRALE_BACKEND_CUDA, &n));
  assert_int_equal(n, 3);
  unsetenv("METRALE_BACKEND");
  const char* bad[] = {"0", "abc", "-1", " 2", "1025", "99999999999999999999"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    setenv("METRALE_HOST_DEVICES", bad[i], 1);
    n = -7;
    MT_STATUS(metrale_device_count(METRALE_BACKEND_HOST, &n), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("METRALE_HOST_DEVICES");
    assert_int_equal(n, -7); /* untouched on failure */
    /* And a context refuses it the same way. */
    metrale_context_options_t o = mt_options();
    o.backend = METRALE_BACKEND_HOST;
    metrale_context_t* ctx = NULL;
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    assert_null(ctx);
  }
  restore_env("METRALE_BACKEND", saved_backend);
  restore_env("METRALE_HOST_DEVICES", saved);
}

static void device_count_refuses_bad_arguments(void** state) {
  (void)state;
  MT_STATUS(metrale_device_count(METRALE_BACKEND_HOST, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  int n = -7;
  MT_STATUS(metrale_device_count((metrale_backend_t)7, &n), METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(n, -7);
  char* saved = swap_env("METRALE_BACKEND", "gpu");
  MT_STATUS(metrale_device_count(METRALE_BACKEND_AUTO, &n), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("METRALE_BACKEND");
  restore_env("METRALE_BACKEND", saved);
  /* The test backend answers with at least one device (cuda: or skips). */
  metrale_status_t s = metrale_device_count(mt_backend(), &n);
  if (mt_backend() == METRALE_BACKEND_CUDA && s != METRALE_OK) {
    assert_true(s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE);
    skip();
  }
  MT_OK(s);
  assert_true(n >= 1);
}

static void a_context_on_every_device(void** state) {
  (void)state;
  int n = device_count();
  if (n > 4) n = 4;
  metrale_context_t* ctx[4] = {NULL};
  metrale_devptr_t p[4] = {0};
  for (int d = 0; d < n; ++d) {
    ctx[d] = open_on(d);
    metrale_device_info_t info;
    MT_OK(metrale_device_info(ctx[d], &info));
    assert_int_equal(info.ordinal, d);
    MT_OK(metrale_alloc(ctx[d], 4096u * (unsigned)(d + 1), &p[d]));
    MT_OK(metrale_memset(ctx[d], p[d], (uint8_t)(0x10 + d), 4096));
  }
  /* Each context keeps its own memory and ledger. */
  for (int d = 0; d < n; ++d) {
    unsigned char* got = mt_read_device(ctx[d], p[d], 4096);
    for (int i = 0; i < 4096; ++i) assert_int_equal(got[i], 0x10 + d);
    free(got);
    mt_ledger_t l = mt_ledger(ctx[d]);
    assert_int_equal(l.count, 1);
    assert_int_equal(l.bytes, 4096u * (unsigned)(d + 1));
  }
  /* A pointer of one device is not an allocation of another's context. */
  if (n >= 2) {
    MT_STATUS(metrale_free(ctx[1], p[0]), METRALE_ERROR_NOT_FOUND);
  }
  for (int d = 0; d < n; ++d) {
    MT_OK(metrale_free(ctx[d], p[d]));
    mt_close(ctx[d]);
  }
}

static void ordinal_past_the_count_is_no_device(void** state) {
  (void)state;
  const int n = device_count();
  metrale_context_options_t o = mt_options();
  o.device = n;
  metrale_context_t* ctx = NULL;
  MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_NO_DEVICE);
  MT_MESSAGE_HAS("does not exist");
  assert_null(ctx);
  char num[16];
  snprintf(num, sizeof num, "%d", n);
  char* saved = swap_env("METRALE_DEVICE", num);
  o = mt_options(); /* device 0, overridden by METRALE_DEVICE */
  MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_NO_DEVICE);
  MT_MESSAGE_HAS("does not exist");
  assert_null(ctx);
  restore_env("METRALE_DEVICE", saved);
}

/* Allocations at fixed sites, so the report's lines can be checked. */
static metrale_devptr_t alloc_site_a(metrale_context_t* ctx, size_t bytes) {
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, bytes, "site_a.c", 11, &p));
  return p;
}
static metrale_devptr_t alloc_site_b(metrale_context_t* ctx, size_t bytes) {
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, bytes, "site_b.c", 22, &p));
  return p;
}

static void per_device_ledger_sums_its_contexts(void** state) {
  (void)state;
  need_devices(2);
  const metrale_backend_t b = mt_backend();
  metrale_context_t* a0 = open_on(0);
  metrale_context_t* a1 = open_on(1);
  metrale_context_t* b1 = open_on(1);
  size_t bytes = 99, count = 99;
  MT_OK(metrale_device_live(b, 1, &bytes, &count));
  assert_int_equal(bytes, 0);
  assert_int_equal(count, 0);
  metrale_devptr_t p = alloc_site_a(a0, 1000);
  metrale_devptr_t q = alloc_site_a(a1, 3000);
  metrale_devptr_t r = alloc_site_b(b1, 5000);
  MT_OK(metrale_device_live(b, 0, &bytes, &count));
  assert_int_equal(bytes, 1000);
  assert_int_equal(count, 1);
  MT_OK(metrale_device_live(b, 1, &bytes, &count));
  assert_int_equal(bytes, 8000);
  assert_int_equal(count, 2);
  MT_OK(metrale_device_live(b, 1, &bytes, NULL)); /* count may be NULL */
  assert_int_equal(bytes, 8000);
  /* The other backend's device 1 is another device. */
  MT_OK(metrale_device_live(b == METRALE_BACKEND_HOST ? METRALE_BACKEND_CUDA : METRALE_BACKEND_HOST,
                            1, &bytes, &count));
  assert_int_equal(bytes, 0);
  MT_OK(metrale_free(a1, q));
  MT_OK(metrale_device_live(b, 1, &bytes, &count));
  assert_int_equal(bytes, 5000);
  assert_int_equal(count, 1);
  /* A destroyed context leaves the per-device ledger. */
  mt_close(b1);
  (void)r;
  MT_OK(metrale_device_live(b, 1, &bytes, &count));
  assert_int_equal(bytes, 0);
  assert_int_equal(count, 0);
  MT_OK(metrale_free(a0, p));
  mt_close(a0);
  mt_close(a1);
}

static void device_live_refuses_bad_arguments(void** state) {
  (void)state;
  size_t bytes = 7, count = 7;
  MT_STATUS(metrale_device_live(METRALE_BACKEND_AUTO, 0, &bytes, &count),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_device_live((metrale_backend_t)9, 0, &bytes, &count),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_device_live(METRALE_BACKEND_HOST, -1, &bytes, &count),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_device_live(METRALE_BACKEND_HOST, 0, NULL, &count),
            METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(bytes, 7);
  assert_int_equal(count, 7);
}

static char* report_all(size_t top_n, size_t min_mib) {
  size_t needed = 0;
  MT_OK(metrale_alloc_report_all(top_n, min_mib, NULL, 0, &needed));
  assert_true(needed > 1);
  char* buf = malloc(needed);
  size_t again = 0;
  MT_OK(metrale_alloc_report_all(top_n, min_mib, buf, needed, &again));
  assert_int_equal(again, needed);
  assert_int_equal(strlen(buf) + 1, needed);
  return buf;
}

/* The line of `text` that starts with `prefix`, or NULL. */
static const char* line_of(const char* text, const char* prefix) {
  for (const char* l = text; l != NULL && *l != '\0';) {
    if (strncmp(l, prefix, strlen(prefix)) == 0) return l;
    l = strchr(l, '\n');
    if (l != NULL) ++l;
  }
  return NULL;
}

static void process_report_names_device_site_and_bytes(void** state) {
  (void)state;
  need_devices(2);
  const char* kind = mt_backend_name();
  metrale_context_t* c0 = open_on(0);
  metrale_context_t* c1 = open_on(1);
  metrale_context_t* d1 = open_on(1);
  metrale_devptr_t p = alloc_site_a(c0, 1u << 20);
  metrale_devptr_t q = alloc_site_a(c1, 2u << 20);
  metrale_devptr_t r = alloc_site_a(d1, 1u << 20); /* same site, same device: merged */
  metrale_devptr_t s = alloc_site_b(d1, 4096);
  char* text = report_all(0, 0);
  char dev0[64], dev1[64];
  snprintf(dev0, sizeof dev0, "%s device 0: ", kind);
  snprintf(dev1, sizeof dev1, "%s device 1: ", kind);
  const char* l0 = line_of(text, dev0);
  const char* l1 = line_of(text, dev1);
  if (l0 == NULL || l1 == NULL) print_error("report:\n%s", text);
  assert_non_null(l0);
  assert_non_null(l1);
  assert_true(l0 < l1); /* by ordinal */
  assert_true(strncmp(l0 + strlen(dev0), "1.0 MiB (1048576 bytes) in 1 allocation, 1 context\n",
                      50) == 0);
  assert_true(strncmp(l1 + strlen(dev1),
                      "3.0 MiB (3149824 bytes) in 3 allocations, 2 contexts\n", 52) == 0);
  /* Device 1's sites: the merged one first (largest), then site_b. */
  const char* merged = strstr(l1, "  3.0 MiB (3145728 bytes) in 2 allocations at site_a.c:11\n");
  const char* small = strstr(l1, "  4.0 KiB (4096 bytes) in 1 allocation at site_b.c:22\n");
  if (merged == NULL || small == NULL) print_error("report:\n%s", text);
  assert_non_null(merged);
  assert_non_null(small);
  assert_true(merged < small);
  assert_non_null(strstr(text, "total: "));
  free(text);
  /* top_n per device and min_mib select sites, not devices. */
  text = report_all(1, 0);
  assert_null(strstr(text, "site_b.c"));
  assert_non_null(line_of(text, dev1));
  free(text);
  text = report_all(0, 2);
  assert_null(strstr(text, "(1048576 bytes) in 1 allocation at"));
  assert_non_null(strstr(text, "(3145728 bytes) in 2 allocations at site_a.c:11"));
  free(text);
  /* Freed and destroyed memory leaves the report. */
  MT_OK(metrale_free(d1, r));
  MT_OK(metrale_free(d1, s));
  mt_close(d1);
  text = report_all(0, 0);
  l1 = line_of(text, dev1);
  assert_non_null(l1);
  assert_true(strncmp(l1 + strlen(dev1), "2.0 MiB (2097152 bytes) in 1 allocation, 1 context\n",
                      51) == 0);
  free(text);
  MT_OK(metrale_free(c0, p));
  MT_OK(metrale_free(c1, q));
  mt_close(c0);
  mt_close(c1);
}

static void process_report_buffer_rules(void** state) {
  (void)state;
  metrale_context_t* ctx = open_on(0);
  metrale_devptr_t p = alloc_site_a(ctx, 4096);
  size_t needed = 0;
  MT_STATUS(metrale_alloc_report_all(0, 0, NULL, 0, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_alloc_report_all(0, 0, NULL, 16, &needed), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_alloc_report_all(0, 0, NULL, 0, &needed));
  char small[16];
  size_t got = 0;
  MT_STATUS(metrale_alloc_report_all(0, 0, small, sizeof small, &got),
            METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(got, needed);
  assert_int_equal(strlen(small), sizeof small - 1);
  /* A min_mib past 64 bits selects no site but still lists the device. */
  char* text = report_all(0, (size_t)-1);
  assert_null(strstr(text, "site_a.c"));
  assert_non_null(strstr(text, "device 0: "));
  free(text);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* Reports while other threads create, allocate in and destroy contexts:
 * a context destroyed during a walk waits for it (ASan/TSan builds check
 * nothing freed is read). */
struct churn {
  int device;
  int rounds;
  int done; /* set when the thread ends (atomic builtins) */
};

static void* churn_body(struct churn* c) {
  for (int i = 0; i < c->rounds; ++i) {
    metrale_context_options_t o = mt_options();
    o.device = c->device;
    metrale_context_t* ctx = NULL;
    if (metrale_context_create(&o, &ctx) != METRALE_OK) return (void*)1;
    /* Many sites: a report spends long in this context's ledger, so a
     * destroy overlaps it often (a destroy that did not wait for the
     * report would free what it reads: ASan sees it). */
    metrale_devptr_t p = 0;
    for (int line = 1; line <= 1000; ++line) {
      if (metrale_alloc_at(ctx, 4096, "churn.c", line, &p) != METRALE_OK) return (void*)2;
    }
    if (metrale_context_destroy(ctx) != METRALE_OK) return (void*)4; /* sweeps them */
  }
  return NULL;
}

/* done is set on every exit, so the reporting loop always ends. */
static void* churn_contexts(void* arg) {
  struct churn* c = arg;
  void* ret = churn_body(c);
  __atomic_store_n(&c->done, 1, __ATOMIC_RELEASE);
  return ret;
}

static void report_while_contexts_come_and_go(void** state) {
  (void)state;
  need_devices(2);
  mt_close(open_on(0)); /* skips here when the backend is absent */
  MT_OK(metrale_log_set_level(METRALE_LOG_ERROR)); /* the sweeps' warnings */
  struct churn jobs[2] = {{0, 20, 0}, {1, 20, 0}};
  pthread_t t[2];
  for (int i = 0; i < 2; ++i) assert_int_equal(pthread_create(&t[i], NULL, churn_contexts, &jobs[i]), 0);
  /* Reports for as long as contexts come and go. */
  for (int i = 0; i < 100 || !(__atomic_load_n(&jobs[0].done, __ATOMIC_ACQUIRE) &&
                               __atomic_load_n(&jobs[1].done, __ATOMIC_ACQUIRE));
       ++i) {
    size_t needed = 0;
    char buf[4096];
    metrale_status_t s = metrale_alloc_report_all(0, 0, buf, sizeof buf, &needed);
    assert_true(s == METRALE_OK || s == METRALE_ERROR_BUFFER_TOO_SMALL);
    size_t bytes = 0;
    MT_OK(metrale_device_live(mt_backend(), 1, &bytes, NULL));
    assert_true(bytes % 4096 == 0);
  }
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN)); /* the default */
  for (int i = 0; i < 2; ++i) {
    void* ret = (void*)9;
    assert_int_equal(pthread_join(t[i], &ret), 0);
    assert_null(ret);
  }
  size_t bytes = 1;
  MT_OK(metrale_device_live(mt_backend(), 1, &bytes, NULL));
  assert_int_equal(bytes, 0);
}

/* The driver's stream for NCCL and friends: a CUstream on cuda, refused on
 * the host backend, never for a dead stream. */
static void native_stream_for_interop(void** state) {
  (void)state;
  metrale_context_t* ctx = open_on(0);
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(ctx, &s));
  void* native = (void*)1;
  MT_STATUS(metrale_stream_native(ctx, s, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_stream_native(NULL, s, &native), METRALE_ERROR_INVALID_ARGUMENT);
  if (mt_is_host(ctx)) {
    MT_STATUS(metrale_stream_native(ctx, s, &native), METRALE_ERROR_UNSUPPORTED);
    MT_MESSAGE_HAS("no native stream");
    assert_ptr_equal(native, (void*)1);
  } else {
    void* a = NULL;
    void* d = NULL;
    MT_OK(metrale_stream_native(ctx, s, &a));
    MT_OK(metrale_stream_native(ctx, NULL, &d));
    assert_non_null(a);
    assert_non_null(d);
    assert_ptr_not_equal(a, d);
  }
  MT_OK(metrale_stream_destroy(ctx, s));
  native = (void*)1;
  MT_STATUS(metrale_stream_native(ctx, s, &native), METRALE_ERROR_INVALID_ARGUMENT);
  assert_ptr_equal(native, (void*)1);
  mt_close(ctx);
}

int main(void) {
  setenv("METRALE_HOST_DEVICES", "4", 0); /* the caller's value wins */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(host_device_count_follows_the_variable),
      cmocka_unit_test(device_count_refuses_bad_arguments),
      cmocka_unit_test(a_context_on_every_device),
      cmocka_unit_test(ordinal_past_the_count_is_no_device),
      cmocka_unit_test(per_device_ledger_sums_its_contexts),
      cmocka_unit_test(device_live_refuses_bad_arguments),
      cmocka_unit_test(process_report_names_device_site_and_bytes),
      cmocka_unit_test(process_report_buffer_rules),
      cmocka_unit_test(report_while_contexts_come_and_go),
      cmocka_unit_test(native_stream_for_interop),
  };
  return MT_RUN(tests);
}
