/* METRALE_NVTX and the NVTX memory annotations (include/metrale_gpu.h, "The
 * caching pool"). The annotations only do something under a tool on the
 * cuda backend (scripts/nvtx-memcheck.sh shows that on a GPU); here: the
 * variable is parsed strictly, and turning them on or off, with or without
 * a (bogus) tool named, changes nothing a program can see. */
#include <stdlib.h>

#include "test_support.h"

static metrale_status_t create_with_nvtx(const char* value, metrale_context_t** out) {
  metrale_context_options_t o = mt_options();
  setenv("METRALE_NVTX", value, 1);
  metrale_status_t s = metrale_context_create(&o, out);
  unsetenv("METRALE_NVTX");
  if ((s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) &&
      o.backend == METRALE_BACKEND_CUDA) {
    print_message("skip: cuda backend unavailable: %s\n", metrale_last_error_message());
    skip();
  }
  return s;
}

static void nvtx_accepts_0_1_and_empty(void** state) {
  (void)state;
  static const char* const ok[] = {"0", "1", ""};
  for (size_t i = 0; i < sizeof ok / sizeof ok[0]; ++i) {
    metrale_context_t* ctx = NULL;
    metrale_status_t s = create_with_nvtx(ok[i], &ctx);
    if (s != METRALE_OK) {
      print_error("METRALE_NVTX=\"%s\": got %s: %s\n", ok[i], metrale_status_name(s),
                  metrale_last_error_message());
      fail();
    }
    mt_close(ctx);
  }
}

static void nvtx_malformed_is_invalid(void** state) {
  (void)state;
  static const char* const bad[] = {"2", "yes", "on", "true", " 1", "1 ", "01", "-1", "0x1"};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    metrale_context_t* ctx = NULL;
    metrale_status_t s = create_with_nvtx(bad[i], &ctx);
    if (s != METRALE_ERROR_INVALID_ARGUMENT) {
      print_error("METRALE_NVTX=\"%s\": got %s, expected METRALE_ERROR_INVALID_ARGUMENT\n",
                  bad[i], metrale_status_name(s));
      if (s == METRALE_OK) metrale_context_destroy(ctx);
      fail();
    }
    assert_null(ctx);
    MT_MESSAGE_HAS("METRALE_NVTX");
    MT_MESSAGE_HAS(bad[i]);
  }
}

/* Two adjacent blocks, written and read back whole, then freed: what the
 * annotations describe must not change what the program sees. */
static void alloc_roundtrip(metrale_context_t* ctx) {
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 1000, &a));
  MT_OK(metrale_alloc(ctx, 1000, &b));
  unsigned char in[1000], out[1000];
  for (size_t i = 0; i < sizeof in; ++i) in[i] = (unsigned char)(i * 7);
  MT_OK(metrale_copy_h2d(ctx, in, sizeof in, a));
  MT_OK(metrale_copy_d2h(ctx, a, out, sizeof out));
  assert_memory_equal(in, out, sizeof in);
  MT_OK(metrale_free(ctx, b));
  MT_OK(metrale_free(ctx, a));
}

static void nvtx_on_and_off_behave_alike(void** state) {
  (void)state;
  static const char* const values[] = {"1", "0"};
  for (size_t i = 0; i < 2; ++i) {
    metrale_context_t* ctx = NULL;
    MT_OK(create_with_nvtx(values[i], &ctx));
    alloc_roundtrip(ctx);
    mt_close(ctx);
  }
}

/* A tool named that cannot be loaded (NVTX3 then makes every call a no-op;
 * on cuda the annotations switch themselves off at the first chunk). Runs
 * last: NVTX3 initialises once per process. */
static void unloadable_tool_changes_nothing(void** state) {
  (void)state;
  setenv("NVTX_INJECTION64_PATH", "/nonexistent/libno-such-tool.so", 1);
  metrale_context_t* ctx = NULL;
  metrale_status_t s = create_with_nvtx("1", &ctx);
  unsetenv("NVTX_INJECTION64_PATH");
  MT_STATUS(s, METRALE_OK);
  alloc_roundtrip(ctx);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(nvtx_accepts_0_1_and_empty),
      cmocka_unit_test(nvtx_malformed_is_invalid),
      cmocka_unit_test(nvtx_on_and_off_behave_alike),
      cmocka_unit_test(unloadable_tool_changes_nothing),
  };
  return MT_RUN(tests);
}
