/* metrale_stream_wrap: a handle for a native stream (PyTorch's or CuPy's
 * current stream), counted per native value, never destroying the native
 * stream; what NULL and other values mean on each backend. */
#include <stdint.h>

#include "test_support.h"

static void bad_arguments(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t* s = NULL;
  MT_STATUS(metrale_stream_wrap(NULL, NULL, &s), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_stream_wrap(ctx, NULL, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  assert_null(s);
  mt_close(ctx);
}

/* Host: no native streams; NULL gets a stream of its own, others refused. */
static void host_null_is_a_stream_of_its_own(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_require_host(ctx);
  metrale_stream_t* w = NULL;
  MT_OK(metrale_stream_wrap(ctx, NULL, &w));
  assert_non_null(w);
  assert_ptr_not_equal(w, metrale_default_stream(ctx));
  MT_OK(metrale_stream_synchronize(ctx, w));
  metrale_stream_t* other = NULL;
  MT_STATUS(metrale_stream_wrap(ctx, (void*)(uintptr_t)0x1234, &other),
            METRALE_ERROR_UNSUPPORTED);
  assert_non_null(strstr(metrale_last_error_message(), "native"));
  assert_null(other);
  MT_OK(metrale_stream_destroy(ctx, w));
  MT_STATUS(metrale_stream_synchronize(ctx, w), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

/* One handle per native stream; it dies at the destroy matching its last
 * wrap, and a new wrap afterwards gets a new value (rule 2). */
static void wraps_are_counted(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_stream_t *a = NULL, *b = NULL, *c = NULL;
  MT_OK(metrale_stream_wrap(ctx, NULL, &a));
  MT_OK(metrale_stream_wrap(ctx, NULL, &b));
  assert_ptr_equal(a, b);
  MT_OK(metrale_stream_destroy(ctx, a));
  MT_OK(metrale_stream_synchronize(ctx, b)); /* one wrap left: still live */
  MT_OK(metrale_stream_destroy(ctx, b));
  MT_STATUS(metrale_stream_synchronize(ctx, a), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_stream_destroy(ctx, a), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_stream_wrap(ctx, NULL, &c));
  assert_ptr_not_equal(c, a);
  MT_OK(metrale_stream_destroy(ctx, c));
  mt_close(ctx);
}

/* Memory ordered on a wrapped stream: a block freed on it goes to the next
 * allocation on it at once (the pool's same-stream reuse), and the handle
 * works for copies. Left wrapped at context destroy: no error. */
static void pooled_memory_orders_on_the_wrap(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.pool = 1;
  metrale_context_t* ctx = mt_open(&o);
  const int pooled = mt_pool_on(ctx); /* METRALE_POOL=0 overrides o.pool */
  metrale_stream_t* w = NULL;
  MT_OK(metrale_stream_wrap(ctx, NULL, &w));
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_alloc_async(ctx, 4096, w, &p));
  uint32_t in = 0xfeedbeefu, out = 0;
  MT_OK(metrale_copy_h2d_async(ctx, &in, sizeof in, p, w));
  MT_OK(metrale_copy_d2h_on_stream(ctx, p, &out, sizeof out, w));
  assert_int_equal(out, in);
  MT_OK(metrale_free_async(ctx, p, w));
  MT_OK(metrale_alloc_async(ctx, 4096, w, &q));
  MT_OK(metrale_free_async(ctx, q, w));
  if (pooled) assert_int_equal(q, p);
  mt_close(ctx);
}

/* The last unwrap retires the stream in the pool: a block still allocated
 * on it can be freed afterwards, on the default stream. */
static void block_outlives_its_wrap(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.pool = 1;
  metrale_context_t* ctx = mt_open(&o);
  metrale_stream_t* w = NULL;
  MT_OK(metrale_stream_wrap(ctx, NULL, &w));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async(ctx, 1024, w, &p));
  MT_OK(metrale_stream_destroy(ctx, w));
  MT_STATUS(metrale_free_async(ctx, p, w), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_free(ctx, p));
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

/* cuda: NULL is the legacy default stream, and CU_STREAM_LEGACY (0x1)
 * names the same stream, so both give one handle. */
static void cuda_null_is_the_legacy_stream(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  if (mt_is_host(ctx)) {
    mt_close(ctx);
    skip();
  }
  metrale_stream_t *a = NULL, *b = NULL;
  MT_OK(metrale_stream_wrap(ctx, NULL, &a));
  MT_OK(metrale_stream_wrap(ctx, (void*)(uintptr_t)0x1, &b));
  assert_ptr_equal(a, b);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_async(ctx, 1 << 20, a, &p));
  MT_OK(metrale_memset_async(ctx, p, 7, 1 << 20, a));
  MT_OK(metrale_stream_synchronize(ctx, a));
  MT_OK(metrale_free_async(ctx, p, a));
  MT_OK(metrale_stream_destroy(ctx, a));
  MT_OK(metrale_stream_destroy(ctx, b));
  MT_STATUS(metrale_stream_destroy(ctx, b), METRALE_ERROR_INVALID_ARGUMENT);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(bad_arguments),
      cmocka_unit_test(host_null_is_a_stream_of_its_own),
      cmocka_unit_test(wraps_are_counted),
      cmocka_unit_test(pooled_memory_orders_on_the_wrap),
      cmocka_unit_test(block_outlives_its_wrap),
      cmocka_unit_test(cuda_null_is_the_legacy_stream),
  };
  return MT_RUN(tests);
}
