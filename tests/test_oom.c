/* A request the device cannot meet: OUT_OF_MEMORY, a message naming the
 * bytes asked and the sites holding the most, and the ledger untouched. */
#include "test_support.h"

#define TIB ((size_t)1 << 40)

static void one_tib_is_out_of_memory(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t held[3];
  MT_OK(metrale_alloc_at(ctx, 3 << 20, "holder_big.c", 1, &held[0]));
  MT_OK(metrale_alloc_at(ctx, 2 << 20, "holder_mid.c", 2, &held[1]));
  MT_OK(metrale_alloc_at(ctx, 1 << 20, "holder_small.c", 3, &held[2]));
  mt_ledger_t before = mt_ledger(ctx);
  metrale_counters_t c_before = mt_counters(ctx);

  metrale_devptr_t p = 0xFEED;
  MT_STATUS(metrale_alloc_at(ctx, TIB, "oom_site.c", 9, &p), METRALE_ERROR_OUT_OF_MEMORY);
  assert_int_equal(p, 0xFEED);
  MT_MESSAGE_HAS("1099511627776");
  MT_MESSAGE_HAS("holder_big.c");
  MT_MESSAGE_HAS("holder_mid.c");
  MT_MESSAGE_HAS("holder_small.c");
  MT_LEDGER_SAME(ctx, before);
  assert_int_equal(mt_counters(ctx).allocs, c_before.allocs);

  /* The context is still healthy. */
  MT_OK(metrale_context_fault(ctx));
  metrale_devptr_t q = 0;
  MT_OK(metrale_alloc(ctx, 64, &q));
  MT_OK(metrale_free(ctx, q));
  for (int i = 0; i < 3; ++i) MT_OK(metrale_free(ctx, held[i]));
  mt_close(ctx);
}

static void one_tib_managed_is_out_of_memory(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  /* Managed memory may oversubscribe on a GPU host; on the host backend it
   * is plain host memory, which cannot hold 1 TiB here. */
  mt_require_host(ctx);
  mt_ledger_t before = mt_ledger(ctx);
  metrale_devptr_t p = 0;
  MT_STATUS(metrale_alloc_managed(ctx, TIB, &p), METRALE_ERROR_OUT_OF_MEMORY);
  MT_MESSAGE_HAS("1099511627776");
  MT_LEDGER_SAME(ctx, before);
  mt_close(ctx);
}

static void one_tib_with_redzone_is_out_of_memory(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 256;
  metrale_context_t* ctx = mt_open(&o);
  mt_ledger_t before = mt_ledger(ctx);
  metrale_devptr_t p = 0;
  MT_STATUS(metrale_alloc(ctx, TIB, &p), METRALE_ERROR_OUT_OF_MEMORY);
  MT_LEDGER_SAME(ctx, before);
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  mt_close(ctx);
}

/* The pool's retry gives its cached chunks back first, and the message
 * says how much it released. With red zones the first try (before the
 * freed blocks' check) once released them, so the retry's message said
 * "released 0". */
static void the_message_tells_what_the_retry_released(void** state) {
  (void)state;
  for (size_t pad = 0; pad <= 64; pad += 64) {
    metrale_context_options_t o = mt_options();
    o.redzone_bytes = pad;
    metrale_context_t* ctx = mt_open(&o);
    if (!mt_pool_on(ctx)) {
      mt_close(ctx);
      skip();
    }
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc(ctx, 5 << 20, &p));
    MT_OK(metrale_free(ctx, p));
    size_t n = 0;
    MT_OK(metrale_redzone_scan(ctx, NULL, 0, &n)); /* the freed block is back */
    metrale_pool_stats_t st = {.struct_size = sizeof st};
    MT_OK(metrale_pool_stats(ctx, &st));
    assert_true(st.reserved_bytes > 0);
    assert_int_equal(st.in_use_bytes, 0);
    char want[96];
    snprintf(want, sizeof want, "released %llu cached bytes",
             (unsigned long long)st.reserved_bytes);
    MT_STATUS(metrale_alloc(ctx, TIB, &p), METRALE_ERROR_OUT_OF_MEMORY);
    MT_MESSAGE_HAS(want);
    mt_close(ctx);
  }
}

static void size_max_is_refused(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64; /* bytes + pad would wrap */
  metrale_context_t* ctx = mt_open(&o);
  mt_ledger_t before = mt_ledger(ctx);
  metrale_devptr_t p = 0;
  metrale_status_t s = metrale_alloc(ctx, SIZE_MAX - 8, &p);
  assert_true(s == METRALE_ERROR_OUT_OF_MEMORY || s == METRALE_ERROR_INVALID_ARGUMENT);
  assert_true(metrale_last_error_message()[0] != '\0');
  MT_LEDGER_SAME(ctx, before);
  void* h = NULL;
  s = metrale_host_alloc_pinned(ctx, SIZE_MAX - 8, &h);
  assert_true(s == METRALE_ERROR_OUT_OF_MEMORY || s == METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(one_tib_is_out_of_memory),
      cmocka_unit_test(one_tib_managed_is_out_of_memory),
      cmocka_unit_test(one_tib_with_redzone_is_out_of_memory),
      cmocka_unit_test(the_message_tells_what_the_retry_released),
      cmocka_unit_test(size_max_is_refused),
  };
  return MT_RUN(tests);
}
