#include "test_support.h"

#include <stdlib.h>
#include <string.h>

#include "host_kernels.h"

metrale_backend_t mt_backend(void) {
  const char* v = getenv("METRALE_TEST_BACKEND");
  if (v != NULL && strcmp(v, "cuda") == 0) return METRALE_BACKEND_CUDA;
  return METRALE_BACKEND_HOST;
}

void mt_apply_filter(void) {
  const char* f = getenv("METRALE_TEST_FILTER");
  if (f != NULL && f[0] != '\0') cmocka_set_test_filter(f);
}

const char* mt_backend_name(void) {
  return mt_backend() == METRALE_BACKEND_CUDA ? "cuda" : "host";
}

metrale_context_options_t mt_options(void) {
  metrale_context_options_t opts;
  memset(&opts, 0, sizeof opts);
  metrale_status_t s = metrale_context_options_init(&opts);
  if (s != METRALE_OK) {
    print_error("metrale_context_options_init: %s\n", metrale_status_name(s));
    fail();
  }
  opts.backend = mt_backend();
  return opts;
}

metrale_context_t* mt_open(const metrale_context_options_t* opts) {
  metrale_context_options_t defaults;
  if (opts == NULL) {
    defaults = mt_options();
    opts = &defaults;
  }
  metrale_context_t* ctx = NULL;
  metrale_status_t s = metrale_context_create(opts, &ctx);
  if (s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) {
    if (opts->backend == METRALE_BACKEND_CUDA) {
      print_message("skip: cuda backend unavailable (%s): %s\n", metrale_status_name(s),
                    metrale_last_error_message());
      skip();
    }
  }
  if (s != METRALE_OK || ctx == NULL) {
    print_error("metrale_context_create: %s: %s\n", metrale_status_name(s),
                metrale_last_error_message());
    fail();
  }
  return ctx;
}

void mt_close(metrale_context_t* ctx) { MT_OK(metrale_context_destroy(ctx)); }

int mt_is_host(metrale_context_t* ctx) {
  return metrale_context_backend(ctx) == METRALE_BACKEND_HOST;
}

metrale_status_t mt_create_without_pool(metrale_context_options_t* opts, metrale_context_t** ctx) {
  const char* had = getenv("METRALE_POOL");
  char* saved = had ? strdup(had) : NULL;
  setenv("METRALE_POOL", "0", 1);
  opts->pool = 0;
  metrale_status_t s = metrale_context_create(opts, ctx);
  if (saved) {
    setenv("METRALE_POOL", saved, 1);
    free(saved);
  } else {
    unsetenv("METRALE_POOL");
  }
  return s;
}

metrale_pool_stats_t mt_pool_stats(metrale_context_t* ctx) {
  metrale_pool_stats_t st;
  memset(&st, 0, sizeof st);
  st.struct_size = sizeof st;
  if (metrale_pool_stats(ctx, &st) != METRALE_OK) fail_msg("%s", metrale_last_error_message());
  return st;
}

int mt_pool_on(metrale_context_t* ctx) { return mt_pool_stats(ctx).enabled; }

int mt_under_valgrind(void) {
  const char* p = getenv("LD_PRELOAD");
  return p != NULL && strstr(p, "vgpreload") != NULL;
}

void mt_require_host(metrale_context_t* ctx) {
  if (!mt_is_host(ctx)) {
    print_message("skip: this case reads device pointers as host addresses (host backend only)\n");
    skip();
  }
}

void mt_load_kernels(metrale_context_t* ctx) {
  if (mt_is_host(ctx)) {
    MT_OK(mt_register_host_kernels(ctx, MT_KERNEL_MODULE));
    return;
  }
  const char* path = getenv("METRALE_TEST_KERNELS");
  if (path == NULL || path[0] == '\0') {
    print_message("skip: METRALE_TEST_KERNELS is empty (nvcc was not found at build time)\n");
    skip();
  }
  MT_OK(metrale_module_load_file(ctx, MT_KERNEL_MODULE, path));
}

metrale_kernel_t* mt_kernel(metrale_context_t* ctx, const char* func) {
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, MT_KERNEL_MODULE, func, &k));
  assert_non_null(k);
  return k;
}

static metrale_dim3_t dim(uint32_t x) {
  metrale_dim3_t d = {x, 1, 1};
  return d;
}

static metrale_dim3_t grid_for(uint64_t n) {
  uint64_t blocks = (n + 255) / 256;
  return dim(blocks == 0 ? 1 : (uint32_t)blocks);
}

metrale_status_t mt_fill_u32(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t p,
                             uint32_t value, uint64_t n) {
  void* params[] = {&p, &value, &n};
  return metrale_launch(ctx, mt_kernel(ctx, "fill_u32"), grid_for(n), dim(256), 0, s, params);
}

metrale_status_t mt_add_f32(metrale_context_t* ctx, metrale_stream_t* s, metrale_devptr_t a,
                            metrale_devptr_t b, metrale_devptr_t c, uint64_t n) {
  void* params[] = {&a, &b, &c, &n};
  return metrale_launch(ctx, mt_kernel(ctx, "add_f32"), grid_for(n), dim(256), 0, s, params);
}

metrale_status_t mt_overflow_write(metrale_context_t* ctx, metrale_devptr_t p, uint64_t bytes,
                                   uint64_t extra, uint32_t value) {
  void* params[] = {&p, &bytes, &extra, &value};
  metrale_status_t s = metrale_launch(ctx, mt_kernel(ctx, "overflow_write"), grid_for(bytes + extra),
                                      dim(256), 0, NULL, params);
  if (s != METRALE_OK) return s;
  return metrale_stream_synchronize(ctx, NULL);
}

static char g_errors[8192];
static void keep_error(metrale_log_level_t level, const char* msg, void* user) {
  (void)user;
  if (level < METRALE_LOG_ERROR) return;
  strncat(g_errors, msg, sizeof g_errors - strlen(g_errors) - 2);
  strcat(g_errors, "\n");
}
void mt_keep_errors(void) {
  g_errors[0] = '\0';
  MT_OK(metrale_log_set_callback(keep_error, NULL));
}
void mt_stop_keeping_errors(void) { MT_OK(metrale_log_set_callback(NULL, NULL)); }
const char* mt_errors(void) { return g_errors; }

mt_ledger_t mt_ledger(metrale_context_t* ctx) {
  mt_ledger_t l = {0, 0};
  MT_OK(metrale_live_count(ctx, &l.count));
  MT_OK(metrale_live_bytes(ctx, &l.bytes));
  return l;
}

metrale_counters_t mt_counters(metrale_context_t* ctx) {
  metrale_counters_t c;
  memset(&c, 0, sizeof c);
  c.struct_size = sizeof c;
  MT_OK(metrale_counters(ctx, &c));
  return c;
}

void mt_check_status(metrale_status_t got, metrale_status_t want, const char* expr,
                     const char* file, int line) {
  const char* msg = metrale_last_error_message();
  if (msg == NULL) {
    print_error("%s:%d: %s: metrale_last_error_message() returned NULL\n", file, line, expr);
    _fail(file, line);
  }
  if (got != want) {
    print_error("%s:%d: %s returned %s, expected %s; message: \"%s\"\n", file, line, expr,
                metrale_status_name(got), metrale_status_name(want), msg);
    _fail(file, line);
  }
  if (want != METRALE_OK && msg[0] == '\0') {
    print_error("%s:%d: %s returned %s with an empty error message\n", file, line, expr,
                metrale_status_name(got));
    _fail(file, line);
  }
}

void mt_check_ledger(metrale_context_t* ctx, mt_ledger_t before, const char* file, int line) {
  mt_ledger_t now = mt_ledger(ctx);
  if (now.count != before.count || now.bytes != before.bytes) {
    print_error("%s:%d: ledger changed: count %zu -> %zu, bytes %zu -> %zu\n", file, line,
                before.count, now.count, before.bytes, now.bytes);
    _fail(file, line);
  }
}

void mt_check_message_has(const char* needle, const char* file, int line) {
  const char* msg = metrale_last_error_message();
  if (msg == NULL || strstr(msg, needle) == NULL) {
    print_error("%s:%d: last error message \"%s\" does not contain \"%s\"\n", file, line,
                msg ? msg : "(null)", needle);
    _fail(file, line);
  }
}

void* mt_read_device(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes) {
  void* buf = malloc(bytes ? bytes : 1);
  assert_non_null(buf);
  MT_OK(metrale_copy_d2h(ctx, p, buf, bytes));
  return buf;
}
