/* The pooled fast path of metrale_alloc / metrale_free (issue 10,
 * src/core/pool_fast_path.cpp) meeting the general path: a metrale_free
 * that the fast path must leave alone (a padded block) and frees that mix
 * both paths keep the ledger and the pad table exact. Runs with the pool
 * on; with METRALE_POOL=0 the cases skip. */
#include <stdlib.h>
#include <string.h>

#include "test_support.h"

static metrale_context_t* open_pool(size_t redzone) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = redzone;
  metrale_context_t* ctx = mt_open(&o);
  if (!mt_pool_on(ctx)) {
    mt_close(ctx);
    print_message("skip: the pool is off (METRALE_POOL=0)\n");
    skip();
  }
  return ctx;
}

static size_t live_count(metrale_context_t* ctx) {
  size_t n = 99;
  MT_OK(metrale_live_count(ctx, &n));
  return n;
}

/* With red zones, a padded block freed by metrale_free must leave the pad
 * table too: here B's pad would stay behind, and A's free (through the
 * general path, which moves the table's last pad into A's slot) would then
 * bring B's entry back to life. A is freed on another stream than its own,
 * which no fast path takes (metrale_free_async on the block's own stream
 * may). */
static void a_padded_free_leaves_the_pad_table(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(64);
  metrale_stream_t* other = NULL;
  MT_OK(metrale_stream_create(ctx, &other));
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(metrale_alloc(ctx, 4096, &b));
  MT_OK(metrale_free(ctx, b));
  assert_int_equal(live_count(ctx), 1);
  MT_OK(metrale_free_async(ctx, a, other));
  assert_int_equal(live_count(ctx), 0);
  /* B is dead for good: a second free is refused. */
  MT_STATUS(metrale_free(ctx, b), METRALE_ERROR_NOT_FOUND);
  metrale_redzone_violation_t v[4];
  size_t n = 99;
  MT_OK(metrale_redzone_scan(ctx, v, 4, &n));
  assert_int_equal(n, 0);
  MT_OK(metrale_stream_synchronize(ctx, other));
  MT_OK(metrale_stream_destroy(ctx, other));
  mt_close(ctx);
}

/* Padless: many blocks freed in an order that is not the allocation order,
 * half through metrale_free (fast) and half through metrale_free_async
 * (general), interior pointers and double frees refused on the way; the
 * ledger ends empty and exact. */
/* Pointers no allocation can have, all ones (the ledger table's free-slot
 * mark) among them: NOT_FOUND, and the ledger untouched (the fuzz pass
 * found a free of ~0 taking an empty slot for an entry). */
static void made_up_pointers_are_not_found(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(0);
  metrale_devptr_t live = 0;
  MT_OK(metrale_alloc(ctx, 4096, &live));
  const metrale_devptr_t bad[] = {~(metrale_devptr_t)0, ~(metrale_devptr_t)0 - 1, 1};
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    assert_int_equal(metrale_free(ctx, bad[i]), METRALE_ERROR_NOT_FOUND);
  }
  assert_int_equal(live_count(ctx), 1);
  MT_OK(metrale_free(ctx, live));
  assert_int_equal(live_count(ctx), 0);
  mt_close(ctx);
}

static void fast_and_general_frees_mix(void** state) {
  (void)state;
  metrale_context_t* ctx = open_pool(0);
  enum { N = 3000 };
  metrale_devptr_t* p = calloc(N, sizeof *p);
  assert_non_null(p);
  for (int i = 0; i < N; ++i) MT_OK(metrale_alloc(ctx, 256 + (size_t)(i % 7) * 512, &p[i]));
  assert_int_equal(live_count(ctx), N);
  MT_STATUS(metrale_free(ctx, p[5] + 8), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("is inside the allocation");
  for (int i = 0; i < N; i += 2) MT_OK(metrale_free(ctx, p[(i * 7) % N]));
  for (int i = 0; i < N; i += 2) MT_STATUS(metrale_free(ctx, p[(i * 7) % N]), METRALE_ERROR_NOT_FOUND);
  assert_int_equal(live_count(ctx), N / 2);
  for (int i = 1; i < N; i += 2) MT_OK(metrale_free_async(ctx, p[(i * 7) % N], NULL));
  assert_int_equal(live_count(ctx), 0);
  size_t bytes = 99;
  MT_OK(metrale_live_bytes(ctx, &bytes));
  assert_int_equal(bytes, 0);
  free(p);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(a_padded_free_leaves_the_pad_table),
      cmocka_unit_test(fast_and_general_frees_mix),
      cmocka_unit_test(made_up_pointers_are_not_found),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
