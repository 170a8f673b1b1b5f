/* Modules and kernels: has_module, audited lookups, unknown names, launches
 * with void** and packed buffers, the mixed_params layout, size refusals,
 * host-only registration, load_data on host, unload, native functions. */
#include <dlfcn.h>
#include <stdlib.h>

#include "test_support.h"

static const metrale_dim3_t ONE = {1, 1, 1};

static void has_module_after_load(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  assert_int_equal(metrale_has_module(ctx, MT_KERNEL_MODULE), 0);
  mt_load_kernels(ctx);
  assert_int_equal(metrale_has_module(ctx, MT_KERNEL_MODULE), 1);
  assert_int_equal(metrale_has_module(ctx, "no_such_module"), 0);
  /* Bad arguments answer 0 and explain. */
  assert_int_equal(metrale_has_module(ctx, NULL), 0);
  assert_true(metrale_last_error_message()[0] != '\0');
  assert_int_equal(metrale_has_module(NULL, MT_KERNEL_MODULE), 0);
  assert_true(metrale_last_error_message()[0] != '\0');
  mt_close(ctx);
}

static void lookups_are_audited_with_site(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = NULL;
  metrale_kernel_t* again = NULL;
  int line_found = __LINE__; MT_OK(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "fill_u32", &k));
  assert_non_null(k);
  MT_OK(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "fill_u32", &again));
  assert_ptr_equal(k, again); /* cached */
  metrale_kernel_t* none = (metrale_kernel_t*)ctx;
  int line_miss = __LINE__; MT_STATUS(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "nope", &none),
                                      METRALE_ERROR_NOT_FOUND);
  assert_ptr_equal(none, (metrale_kernel_t*)ctx);
  MT_STATUS(metrale_kernel_get_at(ctx, "ghost_module", "fill_u32", "audit_site.c", 5, &none),
            METRALE_ERROR_NOT_FOUND);

  metrale_kernel_audit_entry_t e[8];
  size_t n = 0;
  MT_OK(metrale_kernel_audit_read(ctx, e, 8, &n));
  assert_int_equal(n, 4);
  assert_string_equal(e[0].module, MT_KERNEL_MODULE);
  assert_string_equal(e[0].function, "fill_u32");
  assert_int_equal(e[0].found, 1);
  assert_string_equal(e[0].file, __FILE__);
  assert_int_equal(e[0].line, line_found);
  assert_int_equal(e[1].found, 1);
  assert_string_equal(e[2].function, "nope");
  assert_int_equal(e[2].found, 0);
  assert_int_equal(e[2].line, line_miss);
  assert_string_equal(e[3].module, "ghost_module");
  assert_int_equal(e[3].found, 0);
  assert_string_equal(e[3].file, "audit_site.c");
  assert_int_equal(e[3].line, 5);
  metrale_counters_t c = mt_counters(ctx);
  assert_int_equal(c.kernel_lookups, 4);
  assert_int_equal(c.kernel_lookup_misses, 2);
  mt_close(ctx);
}

static void launch_with_param_pointers(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  enum { COUNT = 1000 };
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, COUNT * 4 + 64, &p));
  MT_OK(metrale_memset(ctx, p, 0, COUNT * 4 + 64));
  MT_OK(mt_fill_u32(ctx, NULL, p, 0xABCD1234u, COUNT));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  uint32_t* got = mt_read_device(ctx, p, COUNT * 4 + 64);
  for (int i = 0; i < COUNT; ++i) assert_int_equal(got[i], 0xABCD1234u);
  for (int i = COUNT; i < COUNT + 16; ++i) assert_int_equal(got[i], 0); /* n respected */
  free(got);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void launch_add_f32(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  enum { COUNT = 300 };
  float a[COUNT], b[COUNT];
  for (int i = 0; i < COUNT; ++i) {
    a[i] = (float)i;
    b[i] = 0.5f * (float)i;
  }
  metrale_devptr_t da = 0, db = 0, dc = 0;
  MT_OK(metrale_alloc(ctx, sizeof a, &da));
  MT_OK(metrale_alloc(ctx, sizeof b, &db));
  MT_OK(metrale_alloc(ctx, sizeof a, &dc));
  MT_OK(metrale_copy_h2d(ctx, a, sizeof a, da));
  MT_OK(metrale_copy_h2d(ctx, b, sizeof b, db));
  MT_OK(mt_add_f32(ctx, NULL, da, db, dc, COUNT));
  float* c = mt_read_device(ctx, dc, sizeof a);
  for (int i = 0; i < COUNT; ++i) assert_true(c[i] == a[i] + b[i]);
  free(c);
  MT_OK(metrale_free(ctx, da));
  MT_OK(metrale_free(ctx, db));
  MT_OK(metrale_free(ctx, dc));
  mt_close(ctx);
}

static void launch_packed_fill(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64 * 4, &p));
  unsigned char args[24];
  uint32_t value = 77;
  uint64_t n = 64;
  memset(args, 0, sizeof args);
  memcpy(args + 0, &p, 8);
  memcpy(args + 8, &value, 4);
  memcpy(args + 16, &n, 8);
  metrale_dim3_t block = {64, 1, 1};
  MT_OK(metrale_launch_packed(ctx, mt_kernel(ctx, "fill_u32"), ONE, block, 0, NULL, args,
                              sizeof args));
  uint32_t* got = mt_read_device(ctx, p, 64 * 4);
  for (int i = 0; i < 64; ++i) assert_int_equal(got[i], 77);
  free(got);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* mixed_params packed: a@0 b@2 c@4 d@8 e@16 f@24 g@32 out@40, 48 bytes. */
static void pack_mixed(unsigned char args[48], metrale_devptr_t out) {
  uint8_t a = 0xFE;
  uint16_t b = 0xBEEF;
  uint32_t c = 0xDEADBEEFu;
  uint64_t d = 0x0123456789ABCDEFull;
  float e = 1.5f;
  double f = -2.25;
  int8_t g = -7;
  memset(args, 0xCC, 48);
  memcpy(args + 0, &a, 1);
  memcpy(args + 2, &b, 2);
  memcpy(args + 4, &c, 4);
  memcpy(args + 8, &d, 8);
  memcpy(args + 16, &e, 4);
  memcpy(args + 24, &f, 8);
  memcpy(args + 32, &g, 1);
  memcpy(args + 40, &out, 8);
}

static void expect_mixed(metrale_context_t* ctx, metrale_devptr_t out) {
  uint64_t* got = mt_read_device(ctx, out, 7 * 8);
  double e = 1.5, f = -2.25;
  uint64_t e_bits, f_bits;
  memcpy(&e_bits, &e, 8);
  memcpy(&f_bits, &f, 8);
  assert_int_equal(got[0], 0xFE);
  assert_int_equal(got[1], 0xBEEF);
  assert_int_equal(got[2], 0xDEADBEEFu);
  assert_int_equal(got[3], 0x0123456789ABCDEFull);
  assert_int_equal(got[4], e_bits);
  assert_int_equal(got[5], f_bits);
  assert_int_equal(got[6], (uint64_t)(int64_t)-7);
  free(got);
}

static void mixed_params_packed_layout(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, 7 * 8, &out));
  MT_OK(metrale_memset(ctx, out, 0, 7 * 8));
  unsigned char args[48];
  pack_mixed(args, out);
  MT_OK(metrale_launch_packed(ctx, mt_kernel(ctx, "mixed_params"), ONE, ONE, 0, NULL, args, 48));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  expect_mixed(ctx, out);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void mixed_params_pointer_array(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, 7 * 8, &out));
  uint8_t a = 0xFE;
  uint16_t b = 0xBEEF;
  uint32_t c = 0xDEADBEEFu;
  uint64_t d = 0x0123456789ABCDEFull;
  float e = 1.5f;
  double f = -2.25;
  int8_t g = -7;
  void* params[] = {&a, &b, &c, &d, &e, &f, &g, &out};
  MT_OK(metrale_launch(ctx, mt_kernel(ctx, "mixed_params"), ONE, ONE, 0, NULL, params));
  expect_mixed(ctx, out);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void wrong_packed_size_launches_nothing(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_devptr_t out = 0;
  MT_OK(metrale_alloc(ctx, 7 * 8, &out));
  MT_OK(metrale_memset(ctx, out, 0, 7 * 8));
  unsigned char args[64];
  pack_mixed(args, out);
  metrale_kernel_t* k = mt_kernel(ctx, "mixed_params");
  MT_OK(metrale_counters_reset(ctx));
  const size_t sizes[] = {47, 40, 56, 1};
  for (size_t i = 0; i < 4; ++i)
    MT_STATUS(metrale_launch_packed(ctx, k, ONE, ONE, 0, NULL, args, sizes[i]),
              METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch_packed(ctx, k, ONE, ONE, 0, NULL, NULL, 48),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  assert_int_equal(mt_counters(ctx).launches, 0);
  unsigned char* got = mt_read_device(ctx, out, 7 * 8);
  for (int i = 0; i < 7 * 8; ++i) assert_int_equal(got[i], 0);
  free(got);
  MT_OK(metrale_free(ctx, out));
  mt_close(ctx);
}

static void zero_dimension_is_invalid(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = mt_kernel(ctx, "empty_kernel");
  metrale_dim3_t zero_x = {0, 1, 1}, zero_z = {1, 1, 0};
  MT_STATUS(metrale_launch(ctx, k, zero_x, ONE, 0, NULL, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_launch(ctx, k, ONE, zero_z, 0, NULL, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_launch(ctx, k, ONE, ONE, 0, NULL, NULL));
  MT_OK(metrale_launch_packed(ctx, k, ONE, ONE, 0, NULL, NULL, 0));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  mt_close(ctx);
}

/* --- host-backend specifics --------------------------------------------------- */

static void load_data_on_host_is_unsupported(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  static const char image[] = ".version 8.0\n.target sm_90\n.address_size 64\n";
  MT_STATUS(metrale_module_load_data(ctx, "ptx_module", image, sizeof image),
            METRALE_ERROR_UNSUPPORTED);
  assert_int_equal(metrale_has_module(ctx, "ptx_module"), 0);
  mt_close(ctx);
}

static metrale_status_t user_kernel(const metrale_host_kernel_call_t* call, void* user) {
  int* calls = user;
  ++*calls;
  /* Without registered sizes the caller's params come through. */
  if (call->params != NULL) **(uint32_t**)call->params[0] = call->grid.x * call->block.x;
  return METRALE_OK;
}

static metrale_status_t failing_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_ERROR_OUT_OF_BOUNDS;
}

static void register_host_kernels(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  int calls = 0;
  MT_OK(metrale_module_register_host(ctx, "user_mod", "count", user_kernel, &calls));
  assert_int_equal(metrale_has_module(ctx, "user_mod"), 1);
  MT_STATUS(metrale_module_register_host(ctx, "user_mod", "count", user_kernel, &calls),
            METRALE_ERROR_INVALID_ARGUMENT); /* name taken */
  MT_STATUS(metrale_module_register_host(ctx, "user_mod", "other", NULL, NULL),
            METRALE_ERROR_INVALID_ARGUMENT);
  uint32_t result = 0;
  uint32_t* where = &result;
  void* params[] = {&where};
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(ctx, "user_mod", "count", &k));
  metrale_dim3_t grid = {3, 1, 1}, block = {32, 1, 1};
  MT_OK(metrale_launch(ctx, k, grid, block, 0, NULL, params));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  assert_int_equal(calls, 1);
  assert_int_equal(result, 96);
  /* A kernel's non-OK status (other than CONTEXT_LOST) is the launch's. */
  MT_OK(metrale_module_register_host(ctx, "user_mod", "fails", failing_kernel, NULL));
  MT_OK(metrale_kernel_get(ctx, "user_mod", "fails", &k));
  MT_STATUS(metrale_launch(ctx, k, ONE, ONE, 0, NULL, NULL), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_OK(metrale_context_fault(ctx));
  mt_close(ctx);
}

static void register_host_on_cuda_is_unsupported(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  if (mt_is_host(ctx)) {
    print_message("skip: registration is supported on the host backend\n");
    mt_close(ctx);
    skip();
  }
  int calls = 0;
  MT_STATUS(metrale_module_register_host(ctx, "user_mod", "count", user_kernel, &calls),
            METRALE_ERROR_UNSUPPORTED);
  size_t sz = 8;
  MT_STATUS(metrale_module_register_host_params(ctx, "user_mod", "count", user_kernel, &calls,
                                                &sz, 1),
            METRALE_ERROR_UNSUPPORTED);
  mt_close(ctx);
}

static void load_file_errors(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  if (mt_is_host(ctx)) {
    print_message("skip: the host backend loads no images\n");
    mt_close(ctx);
    skip();
  }
  MT_STATUS(metrale_module_load_file(ctx, "missing", "/nonexistent/dir/k.fatbin"),
            METRALE_ERROR_NOT_FOUND);
  static const char junk[] = "this is not a module image";
  MT_STATUS(metrale_module_load_data(ctx, "junk", junk, sizeof junk), METRALE_ERROR_DRIVER);
  MT_STATUS(metrale_module_load_data(ctx, "junk", junk, 0), METRALE_ERROR_INVALID_ARGUMENT);
  mt_load_kernels(ctx);
  const char* path = getenv("METRALE_TEST_KERNELS");
  MT_STATUS(metrale_module_load_file(ctx, MT_KERNEL_MODULE, path),
            METRALE_ERROR_INVALID_ARGUMENT); /* name in use */
  mt_close(ctx);
}

/* --- unload --------------------------------------------------------------------- */

static void unload_makes_kernels_stale(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* k = mt_kernel(ctx, "empty_kernel");
  MT_OK(metrale_module_unload(ctx, MT_KERNEL_MODULE));
  assert_int_equal(metrale_has_module(ctx, MT_KERNEL_MODULE), 0);
  MT_STATUS(metrale_launch(ctx, k, ONE, ONE, 0, NULL, NULL), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_launch_packed(ctx, k, ONE, ONE, 0, NULL, NULL, 0), METRALE_ERROR_NOT_FOUND);
  metrale_kernel_t* again = NULL;
  MT_STATUS(metrale_kernel_get(ctx, MT_KERNEL_MODULE, "empty_kernel", &again),
            METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_module_unload(ctx, MT_KERNEL_MODULE), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_module_unload(ctx, "never_loaded"), METRALE_ERROR_NOT_FOUND);
  /* The name can be used again. */
  mt_load_kernels(ctx);
  MT_OK(metrale_launch(ctx, mt_kernel(ctx, "empty_kernel"), ONE, ONE, 0, NULL, NULL));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  mt_close(ctx);
}

/* The driver answers for the function the library hands out: on cuda it is
 * a CUfunction the driver knows (its attribute query succeeds), one per
 * kernel; on the host backend there is none. */
static void kernel_native_is_the_drivers_function(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_load_kernels(ctx);
  metrale_kernel_t* empty = mt_kernel(ctx, "empty_kernel");
  metrale_kernel_t* fill = mt_kernel(ctx, "fill_u32");
  void* a = NULL;
  MT_STATUS(metrale_kernel_native(ctx, empty, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_kernel_native(NULL, empty, &a), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_kernel_native(ctx, NULL, &a), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_kernel_native(ctx, (metrale_kernel_t*)(uintptr_t)0x1234, &a),
            METRALE_ERROR_INVALID_ARGUMENT);
  /* Another context's kernel is not this context's. */
  metrale_context_t* other = mt_open(NULL);
  mt_load_kernels(other);
  MT_STATUS(metrale_kernel_native(ctx, mt_kernel(other, "empty_kernel"), &a),
            METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(other);
  if (mt_is_host(ctx)) {
    MT_STATUS(metrale_kernel_native(ctx, empty, &a), METRALE_ERROR_UNSUPPORTED);
    assert_non_null(strstr(metrale_last_error_message(), "host backend"));
  } else {
    void* b = NULL;
    MT_OK(metrale_kernel_native(ctx, empty, &a));
    MT_OK(metrale_kernel_native(ctx, fill, &b));
    assert_non_null(a);
    assert_non_null(b);
    assert_ptr_not_equal(a, b);
    void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    assert_non_null(lib);
    typedef int (*get_attr_fn)(int*, int, void*);
    get_attr_fn get_attr = (get_attr_fn)dlsym(lib, "cuFuncGetAttribute");
    assert_non_null(get_attr);
    int threads = 0;
    /* CU_FUNC_ATTRIBUTE_MAX_THREADS_PER_BLOCK = 0 */
    assert_int_equal(get_attr(&threads, 0, a), 0);
    assert_true(threads > 0);
    dlclose(lib);
  }
  /* A kernel of an unloaded module has no function any more. */
  MT_OK(metrale_module_unload(ctx, MT_KERNEL_MODULE));
  MT_STATUS(metrale_kernel_native(ctx, empty, &a), METRALE_ERROR_NOT_FOUND);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(has_module_after_load),
      cmocka_unit_test(lookups_are_audited_with_site),
      cmocka_unit_test(launch_with_param_pointers),
      cmocka_unit_test(launch_add_f32),
      cmocka_unit_test(launch_packed_fill),
      cmocka_unit_test(mixed_params_packed_layout),
      cmocka_unit_test(mixed_params_pointer_array),
      cmocka_unit_test(wrong_packed_size_launches_nothing),
      cmocka_unit_test(zero_dimension_is_invalid),
      cmocka_unit_test(load_data_on_host_is_unsupported),
      cmocka_unit_test(register_host_kernels),
      cmocka_unit_test(register_host_on_cuda_is_unsupported),
      cmocka_unit_test(load_file_errors),
      cmocka_unit_test(unload_makes_kernels_stale),
      cmocka_unit_test(kernel_native_is_the_drivers_function),
  };
  return MT_RUN(tests);
}
