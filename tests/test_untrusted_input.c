/* Rule 6 of the header: untrusted sizes, paths and environment values get a
 * status within the call. Module files that are not regular files (or are
 * too large) are refused at once, a huge min_mib selects nothing, packed
 * arguments of unknown layout are capped, numeric environment variables are
 * digits only, kernel lookups of ever new names (failed) or files (any) do
 * not grow the context's memory without bound, and parameter counts no
 * kernel can have are refused. */
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "test_support.h"

/* --- a watchdog: a hang fails the suite instead of stalling it --------------- */

static void watchdog_fired(int sig) {
  (void)sig;
  static const char msg[] = "watchdog: a call did not return within 20 s (it blocks)\n";
  ssize_t ignored = write(2, msg, sizeof msg - 1);
  (void)ignored;
  _exit(3);
}

static void watchdog_arm(unsigned seconds) {
  signal(SIGALRM, watchdog_fired);
  alarm(seconds);
}

static void watchdog_disarm(void) { alarm(0); }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

/* --- module files -------------------------------------------------------------- */

typedef struct {
  char dir[64];
  char path[128];
} tmp_t;

static void tmp_make(tmp_t* t) {
  strcpy(t->dir, "/tmp/metrale_untrusted_XXXXXX");
  assert_non_null(mkdtemp(t->dir));
}

static const char* tmp_file(tmp_t* t, const char* name) {
  snprintf(t->path, sizeof t->path, "%s/%s", t->dir, name);
  return t->path;
}

/* Loads `path` as a module, expecting `want` within two seconds and no module
 * left behind. */
static void expect_load_file(metrale_context_t* ctx, const char* path, metrale_status_t want,
                             const char* needle) {
  double t0 = now_s();
  MT_STATUS(metrale_module_load_file(ctx, "m", path), want);
  double took = now_s() - t0;
  if (needle != NULL) MT_MESSAGE_HAS(needle);
  assert_true(took < 2.0);
  assert_int_equal(metrale_has_module(ctx, "m"), 0);
}

static void module_files_must_be_regular(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  tmp_t t;
  tmp_make(&t);
  watchdog_arm(20);

  /* /dev/zero would be read until memory runs out. */
  expect_load_file(ctx, "/dev/zero", METRALE_ERROR_INVALID_ARGUMENT, "character device");
  /* A FIFO without a writer: a plain open would wait forever. */
  const char* fifo = tmp_file(&t, "fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  expect_load_file(ctx, fifo, METRALE_ERROR_INVALID_ARGUMENT, "FIFO");
  unlink(fifo);
  /* A directory. */
  expect_load_file(ctx, t.dir, METRALE_ERROR_INVALID_ARGUMENT, "directory");
  /* Missing and empty files. */
  expect_load_file(ctx, tmp_file(&t, "missing"), METRALE_ERROR_NOT_FOUND, "missing");
  const char* empty = tmp_file(&t, "empty");
  int fd = open(empty, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  close(fd);
  expect_load_file(ctx, empty, METRALE_ERROR_INVALID_ARGUMENT, "empty");
  unlink(empty);

  watchdog_disarm();
  rmdir(t.dir);
  mt_close(ctx);
}

/* An event log path that is a FIFO: refused at once, never a wait for a
 * reader, through the call and through METRALE_EVENT_LOG at create. */
static void event_log_fifo_is_refused_without_waiting(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  tmp_t t;
  tmp_make(&t);
  const char* fifo = tmp_file(&t, "events.fifo");
  assert_int_equal(mkfifo(fifo, 0600), 0);
  watchdog_arm(20);
  MT_STATUS(metrale_event_log_open(ctx, fifo), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("not a regular file");
  setenv("METRALE_EVENT_LOG", fifo, 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* other = NULL;
  const metrale_status_t created = metrale_context_create(&o, &other);
  unsetenv("METRALE_EVENT_LOG");
  MT_STATUS(created, METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("METRALE_EVENT_LOG");
  watchdog_disarm();
  unlink(fifo);
  rmdir(t.dir);
  mt_close(ctx);
}

static void too_large_module_file_is_refused_unread(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  tmp_t t;
  tmp_make(&t);
  const char* big = tmp_file(&t, "big.fatbin");
  int fd = open(big, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  /* Sparse: no disk used, but fstat says 1 GiB + 1 byte (and then 64 GiB). */
  assert_int_equal(ftruncate(fd, (off_t)METRALE_MODULE_FILE_MAX_BYTES + 1), 0);
  watchdog_arm(20);
  expect_load_file(ctx, big, METRALE_ERROR_INVALID_ARGUMENT, "METRALE_MODULE_FILE_MAX_BYTES");
  assert_int_equal(ftruncate(fd, (off_t)64 << 30), 0);
  expect_load_file(ctx, big, METRALE_ERROR_INVALID_ARGUMENT, "METRALE_MODULE_FILE_MAX_BYTES");
  watchdog_disarm();
  close(fd);
  unlink(big);

  /* A small regular file gets past the checks: the host backend then says it
   * cannot load GPU images, the cuda driver that it is no image. */
  const char* junk = tmp_file(&t, "junk.ptx");
  fd = open(junk, O_CREAT | O_WRONLY, 0600);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not a module", 12), 12);
  close(fd);
  metrale_status_t s = metrale_module_load_file(ctx, "m", junk);
  assert_true(s == METRALE_ERROR_UNSUPPORTED || s == METRALE_ERROR_DRIVER ||
              s == METRALE_ERROR_INVALID_ARGUMENT);
  if (mt_is_host(ctx)) assert_int_equal(s, METRALE_ERROR_UNSUPPORTED);
  unlink(junk);
  rmdir(t.dir);
  mt_close(ctx);
}

/* --- alloc_report's min_mib ---------------------------------------------------------- */

static void huge_min_mib_selects_no_site(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 3u << 20, &p));
  char buf[4096];
  size_t needed = 0;
  /* Sanity: with min_mib 1 the site is listed. */
  MT_OK(metrale_alloc_report(ctx, 0, 1, buf, sizeof buf, &needed));
  assert_non_null(strstr(buf, __FILE__));
  /* 2^44 MiB is 2^64 bytes: the product wraps to 0 and would list every site. */
  const size_t huge[] = {(size_t)1 << 44, ((size_t)1 << 44) + 3, SIZE_MAX, SIZE_MAX / 2};
  for (size_t i = 0; i < sizeof huge / sizeof huge[0]; ++i) {
    MT_OK(metrale_alloc_report(ctx, 0, huge[i], buf, sizeof buf, &needed));
    if (strstr(buf, __FILE__) != NULL) {
      print_error("min_mib %zu listed a site:\n%s", huge[i], buf);
      fail();
    }
    assert_non_null(strstr(buf, "total: 3.0 MiB in 1 allocation"));
  }
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* --- packed arguments of unknown layout ---------------------------------------------- */

typedef struct {
  int calls;
  size_t last_bytes;
} packed_seen_t;

static metrale_status_t count_packed(const metrale_host_kernel_call_t* call, void* user) {
  packed_seen_t* seen = user;
  seen->calls += 1;
  seen->last_bytes = call->args_bytes;
  return METRALE_OK;
}

static void packed_args_of_unknown_layout_are_capped(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  if (!mt_is_host(ctx)) {
    /* A cuda kernel has an unknown layout only on drivers before 12.4. */
    mt_close(ctx);
    print_message("skip: needs a kernel without a parameter layout (host backend)\n");
    skip();
  }
  packed_seen_t seen = {0, 0};
  MT_OK(metrale_module_register_host(ctx, "loose", "k", count_packed, &seen));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "loose", "k", &k));
  static unsigned char args[METRALE_PACKED_ARGS_MAX_BYTES + 8];
  metrale_dim3_t one = {1, 1, 1};
  metrale_counters_t before = mt_counters(ctx);
  const size_t bad[] = {SIZE_MAX, SIZE_MAX - 3, (size_t)1 << 40, METRALE_PACKED_ARGS_MAX_BYTES + 1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    MT_STATUS(metrale_launch_packed(ctx, k, one, one, 0, NULL, args, bad[i]),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("METRALE_PACKED_ARGS_MAX_BYTES");
  }
  assert_int_equal(seen.calls, 0);
  assert_int_equal(mt_counters(ctx).launches, before.launches);
  /* The limit itself is fine, and so is no argument at all. */
  MT_OK(metrale_launch_packed(ctx, k, one, one, 0, NULL, args, METRALE_PACKED_ARGS_MAX_BYTES));
  assert_int_equal(seen.calls, 1);
  assert_int_equal(seen.last_bytes, METRALE_PACKED_ARGS_MAX_BYTES);
  MT_OK(metrale_launch_packed(ctx, k, one, one, 0, NULL, NULL, 0));
  assert_int_equal(seen.calls, 2);
  mt_close(ctx);
}

/* --- numeric environment variables ----------------------------------------------------- */

static metrale_status_t create_with_env(const char* name, const char* value,
                                        metrale_context_t** out) {
  metrale_context_options_t o = mt_options();
  setenv(name, value, 1);
  *out = NULL;
  metrale_status_t s = metrale_context_create(&o, out);
  unsetenv(name);
  return s;
}

static void env_numbers_are_digits_only(void** state) {
  (void)state;
  metrale_context_t* probe = mt_open(NULL); /* skips when cuda is unavailable */
  const int host = mt_is_host(probe);
  mt_close(probe);
  const char* vars[] = {"METRALE_DEVICE", "METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX",
                        "METRALE_TEST_HOST_FAIL_FREE", "METRALE_TEST_HOST_FAIL_PINNED"};
  const char* bad[] = {" -1", "-1", " 5", "1x", "99999999999999999999", "\t-1", "\n7",
                       "+5",  "5 ", "0x10", "1e3", "-0", "18446744073709551616"};
  for (size_t v = 0; v < sizeof vars / sizeof vars[0]; ++v) {
    /* The fail hooks exist on the host backend only. */
    if (!host && strncmp(vars[v], "METRALE_TEST_HOST_FAIL_", 23) == 0) continue;
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
      metrale_context_t* ctx = NULL;
      metrale_status_t s = create_with_env(vars[v], bad[i], &ctx);
      if (s != METRALE_ERROR_INVALID_ARGUMENT) {
        print_error("%s='%s' gave %s\n", vars[v], bad[i], metrale_status_name(s));
        if (ctx != NULL) metrale_context_destroy(ctx);
        fail();
      }
      assert_null(ctx);
      MT_MESSAGE_HAS(vars[v]);
    }
  }
  /* METRALE_DEVICE is an int: one past INT_MAX is too large as well. */
  metrale_context_t* ctx = NULL;
  MT_STATUS(create_with_env("METRALE_DEVICE", "2147483648", &ctx), METRALE_ERROR_INVALID_ARGUMENT);
  /* Plain digits still work. */
  MT_OK(create_with_env("METRALE_REDZONE", "64", &ctx));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 16, &p));
  metrale_allocation_t a;
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, &a, 1, &n));
  assert_int_equal(a.redzone_bytes, 64);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
  MT_OK(create_with_env("METRALE_REDZONE_MIN_IDX", "007", &ctx));
  mt_close(ctx);
}

/* --- failed kernel lookups --------------------------------------------------------------- */

static size_t resident_bytes(void) {
  FILE* f = fopen("/proc/self/statm", "r");
  assert_non_null(f);
  unsigned long size = 0, resident = 0;
  assert_int_equal(fscanf(f, "%lu %lu", &size, &resident), 2);
  fclose(f);
  return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
}

static void failed_lookup_keeps_its_names(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_kernel_t* k = NULL;
  MT_STATUS(metrale_kernel_get(ctx, "no_such_module", "no_such_function", &k),
            METRALE_ERROR_NOT_FOUND);
  metrale_kernel_audit_entry_t e;
  size_t n = 0;
  MT_OK(metrale_kernel_audit_read(ctx, &e, 1, &n));
  assert_int_equal(n, 1);
  assert_int_equal(e.found, 0);
  assert_string_equal(e.module, "no_such_module");
  assert_string_equal(e.function, "no_such_function");
  assert_string_equal(e.file, __FILE__);
  mt_close(ctx);
}

static void failed_lookups_of_new_names_stay_bounded(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.trace_capacity = 16; /* the audit ring itself stays small */
  metrale_context_t* ctx = mt_open(&o);
  enum { LOOKUPS = 100000 };
  char module[300], func[300];
  memset(module, 'm', sizeof module);
  memset(func, 'f', sizeof func);
  /* Warm up the allocator and the error path before measuring. */
  metrale_kernel_t* k = NULL;
  for (int i = 0; i < 1000; ++i) {
    snprintf(module, 40, "warm_%d_", i);
    module[strlen(module)] = 'm';
    module[250] = '\0';
    snprintf(func, 40, "fn_%d_", i);
    func[strlen(func)] = 'f';
    func[250] = '\0';
    (void)metrale_kernel_get(ctx, module, func, &k);
  }
  const size_t before = resident_bytes();
  for (int i = 0; i < LOOKUPS; ++i) {
    snprintf(module, 40, "mod_%d_", i);
    module[strlen(module)] = 'm';
    module[250] = '\0';
    snprintf(func, 40, "fn_%d_", i);
    func[strlen(func)] = 'f';
    func[250] = '\0';
    metrale_status_t s = metrale_kernel_get(ctx, module, func, &k);
    if (s != METRALE_ERROR_NOT_FOUND) {
      print_error("lookup %d: %s\n", i, metrale_status_name(s));
      fail();
    }
  }
  const size_t after = resident_bytes();
  /* Kept without a bound, 100000 pairs of 250-byte names are over 50 MB. */
  const size_t growth = after > before ? after - before : 0;
  print_message("resident growth over %d failed lookups: %zu KiB\n", LOOKUPS, growth >> 10);
#if defined(__SANITIZE_ADDRESS__)
  /* ASan keeps freed memory in quarantine: resident size says nothing here. */
  (void)growth;
#else
  /* Nor under valgrind, whose own bookkeeping grows with every allocation. */
  const char* preload = getenv("LD_PRELOAD");
  if (preload == NULL || strstr(preload, "vgpreload") == NULL) {
    assert_true(growth < ((size_t)16 << 20));
  }
#endif
  /* The message still names the last one in full. */
  MT_MESSAGE_HAS(module);
  /* The audit still records each lookup, names past the budget replaced. */
  metrale_kernel_audit_entry_t e[16];
  size_t n = 0;
  MT_OK(metrale_kernel_audit_read(ctx, e, 16, &n));
  assert_int_equal(n, 16);
  assert_int_equal(e[15].found, 0);
  assert_non_null(strstr(e[15].module, "not kept"));
  assert_non_null(strstr(e[15].function, "not kept"));
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.kernel_lookup_misses, LOOKUPS + 1000);
  mt_close(ctx);
}

/* A found kernel's lookup keeps its file within the same budget: a caller
 * passing a new file text per lookup (generated names) cannot grow the
 * context for good. Module and function name a real kernel and are kept. */
static metrale_status_t noop_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_OK;
}

static void found_lookups_of_new_files_stay_bounded(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.trace_capacity = 16;
  metrale_context_t* ctx = mt_open(&o);
  metrale_status_t s = metrale_module_register_host(ctx, "m", "f", noop_kernel, NULL);
  if (s == METRALE_ERROR_UNSUPPORTED) {
    mt_close(ctx);
    print_message("skip: host kernels are the host backend's\n");
    skip();
  }
  MT_OK(s);
  /* 4000 files of 500 bytes: about 2 MiB, twice the budget. */
  char file[600];
  memset(file, 'x', 500);
  metrale_kernel_t* k = NULL;
  for (int i = 0; i < 4000; ++i) {
    snprintf(file + 500, 100, "/%d.c", i);
    MT_OK(metrale_kernel_get_at(ctx, "m", "f", file, i, &k));
  }
  metrale_kernel_audit_entry_t e[16];
  size_t n = 0;
  MT_OK(metrale_kernel_audit_read(ctx, e, 16, &n));
  assert_int_equal(n, 16);
  assert_int_equal(e[15].found, 1);
  assert_string_equal(e[15].module, "m");
  assert_string_equal(e[15].function, "f");
  assert_int_equal(e[15].line, 3999);
  assert_non_null(strstr(e[15].file, "not kept"));
  /* A file already kept is still named. */
  MT_OK(metrale_kernel_get(ctx, "m", "f", &k));
  MT_OK(metrale_kernel_audit_read(ctx, e, 16, &n));
  assert_string_equal(e[15].file, __FILE__);
  mt_close(ctx);
}

/* --- parameter counts -------------------------------------------------------------------- */

/* A parameter count no kernel can have is refused before anything is sized
 * by it or any array read past what a kernel could take. */
static void huge_parameter_counts_are_refused(void** state) {
  (void)state;
  watchdog_arm(20);
  enum { MAX = 32764 };
  size_t* sizes = calloc(MAX + 1, sizeof *sizes);
  size_t* aligns = calloc(MAX + 1, sizeof *aligns);
  size_t* offsets = calloc(MAX + 1, sizeof *offsets);
  assert_non_null(sizes);
  assert_non_null(aligns);
  assert_non_null(offsets);
  for (size_t i = 0; i <= MAX; ++i) sizes[i] = aligns[i] = 1;
  size_t end = 7;
  const size_t counts[] = {MAX + 1, (size_t)1 << 40, SIZE_MAX};
  for (size_t c = 0; c < sizeof counts / sizeof counts[0]; ++c) {
    MT_STATUS(metrale_param_layout(sizes, aligns, counts[c], offsets, &end),
              METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("nparams");
    assert_int_equal(end, 7);
  }
  MT_OK(metrale_param_layout(sizes, aligns, MAX, offsets, &end));
  assert_int_equal(end, MAX);
  metrale_context_t* ctx = mt_open(NULL);
  MT_STATUS(metrale_module_register_host_params(ctx, "m", "f", noop_kernel, NULL, sizes, SIZE_MAX),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("nparams");
  MT_STATUS(metrale_module_register_host_layout(ctx, "m", "f", noop_kernel, NULL, sizes, aligns,
                                                (size_t)1 << 40),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("nparams");
  metrale_kernel_t* k = NULL;
  MT_STATUS(metrale_kernel_get(ctx, "m", "f", &k), METRALE_ERROR_NOT_FOUND);
  mt_close(ctx);
  free(sizes);
  free(aligns);
  free(offsets);
  alarm(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(module_files_must_be_regular),
      cmocka_unit_test(event_log_fifo_is_refused_without_waiting),
      cmocka_unit_test(too_large_module_file_is_refused_unread),
      cmocka_unit_test(huge_min_mib_selects_no_site),
      cmocka_unit_test(packed_args_of_unknown_layout_are_capped),
      cmocka_unit_test(env_numbers_are_digits_only),
      cmocka_unit_test(failed_lookup_keeps_its_names),
      cmocka_unit_test(failed_lookups_of_new_names_stay_bounded),
      cmocka_unit_test(found_lookups_of_new_files_stay_bounded),
      cmocka_unit_test(huge_parameter_counts_are_refused),
  };
  return MT_RUN(tests);
}
