/* Versioned structs (struct_size first, as libgit2's options): every size
 * this library has shipped is accepted, a caller with an older, smaller
 * struct gets the fields it knows (output) or defaults for the fields it
 * lacks (input), and no byte past its struct_size is read or written. A
 * size never shipped is INVALID_ARGUMENT with nothing written. One table
 * row per struct of include/metrale_gpu.h that has a struct_size. */
#include <stdlib.h>

#include "test_support.h"

#define FILL 0xEE

/* The sizes shipped, oldest first (LP64). Appending a field changes the
 * last entry's sizeof: keep the old size here and accepted by the library. */
#if UINTPTR_MAX == UINT64_MAX
static const size_t OPTIONS_SHIPPED[] = {56, 104};
static const size_t COUNTERS_SHIPPED[] = {152, 160};
static const size_t POOL_STATS_SHIPPED[] = {96, 152, 160};
#endif

static void shipped_sizes_are_the_header_s(void** state) {
  (void)state;
  /* The older layouts are named by the field that followed them. */
  assert_int_equal(offsetof(metrale_context_options_t, pool), 56);
  assert_int_equal(offsetof(metrale_counters_t, timings_dropped), 152);
#if UINTPTR_MAX == UINT64_MAX
  assert_int_equal(OPTIONS_SHIPPED[1], sizeof(metrale_context_options_t));
  assert_int_equal(COUNTERS_SHIPPED[1], sizeof(metrale_counters_t));
  assert_int_equal(offsetof(metrale_pool_stats_t, pad_fills), POOL_STATS_SHIPPED[0]);
  assert_int_equal(offsetof(metrale_pool_stats_t, pads_unlisted), POOL_STATS_SHIPPED[1]);
  assert_int_equal(POOL_STATS_SHIPPED[2], sizeof(metrale_pool_stats_t));
#else
  skip();
#endif
}

/* Sizes never shipped, around the shipped ones. */
static size_t bad_sizes(const size_t* shipped, size_t n, size_t* out) {
  size_t k = 0;
  out[k++] = 0;
  out[k++] = 8;
  out[k++] = SIZE_MAX;
  for (size_t i = 0; i < n; ++i) {
    out[k++] = shipped[i] - 8;
    out[k++] = shipped[i] - 1;
    out[k++] = shipped[i] + 8;
  }
  /* Drop any that is itself shipped (104 - 8 is not, 160 - 8 is). */
  size_t kept = 0;
  for (size_t j = 0; j < k; ++j) {
    int is_shipped = 0;
    for (size_t i = 0; i < n; ++i) is_shipped |= out[j] == shipped[i];
    if (!is_shipped) out[kept++] = out[j];
  }
  return kept;
}

static void assert_tail(const void* p, size_t from, size_t to) {
  const unsigned char* b = p;
  for (size_t i = from; i < to; ++i) {
    if (b[i] != FILL) {
      print_error("byte %zu past struct_size %zu was written (0x%02x)\n", i, from, b[i]);
      fail();
    }
  }
}

static void counters_accept_every_shipped_size(void** state) {
  (void)state;
#if UINTPTR_MAX == UINT64_MAX
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 10, &p));
  for (size_t i = 0; i < 2; ++i) {
    metrale_counters_t c;
    memset(&c, FILL, sizeof c);
    c.struct_size = COUNTERS_SHIPPED[i];
    MT_OK(metrale_counters(ctx, &c));
    assert_int_equal(c.struct_size, COUNTERS_SHIPPED[i]);
    assert_int_equal(c.allocs, 1);
    assert_int_equal(c.alloc_bytes, 10);
    assert_tail(&c, COUNTERS_SHIPPED[i], sizeof c);
  }
  size_t bad[16];
  const size_t nbad = bad_sizes(COUNTERS_SHIPPED, 2, bad);
  for (size_t j = 0; j < nbad; ++j) {
    metrale_counters_t c;
    memset(&c, FILL, sizeof c);
    c.struct_size = bad[j];
    MT_STATUS(metrale_counters(ctx, &c), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("struct_size");
    assert_int_equal(c.struct_size, bad[j]);
    assert_tail(&c, sizeof c.struct_size, sizeof c);
  }
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
#else
  skip();
#endif
}

static void pool_stats_accept_every_shipped_size(void** state) {
  (void)state;
#if UINTPTR_MAX == UINT64_MAX
  metrale_context_t* ctx = mt_open(NULL);
  metrale_pool_stats_t s;
  for (size_t i = 0; i < 3; ++i) {
    memset(&s, FILL, sizeof s);
    s.struct_size = POOL_STATS_SHIPPED[i];
    MT_OK(metrale_pool_stats(ctx, &s));
    assert_true(s.enabled == 0 || s.enabled == 1);
    assert_int_equal(s.struct_size, POOL_STATS_SHIPPED[i]);
    assert_tail(&s, POOL_STATS_SHIPPED[i], sizeof s);
  }
  size_t bad[16];
  const size_t nbad = bad_sizes(POOL_STATS_SHIPPED, 3, bad);
  for (size_t j = 0; j < nbad; ++j) {
    memset(&s, FILL, sizeof s);
    s.struct_size = bad[j];
    MT_STATUS(metrale_pool_stats(ctx, &s), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("struct_size");
    assert_tail(&s, sizeof s.struct_size, sizeof s);
  }
  mt_close(ctx);
#else
  skip();
#endif
}

/* Options are input: a 0.1 caller's struct ends before `pool`; whatever
 * follows it in memory (here 0xEE bytes, which no 0.2 field accepts: pool
 * 0xEEEEEEEE, staging_buffers far above 1024) must not be read, so the
 * context gets the 0.2 defaults. */
static void options_accept_every_shipped_size(void** state) {
  (void)state;
#if UINTPTR_MAX == UINT64_MAX
  for (size_t i = 0; i < 2; ++i) {
    const size_t size = OPTIONS_SHIPPED[i];
    metrale_context_options_t o;
    memset(&o, FILL, sizeof o);
    MT_OK(metrale_context_options_init_sized(&o, size));
    assert_int_equal(o.struct_size, size);
    assert_tail(&o, size, sizeof o);
    o.backend = mt_options().backend;
    o.redzone_bytes = 64; /* a 0.1 field: taken */
    metrale_context_t* ctx = NULL;
    metrale_status_t s = metrale_context_create(&o, &ctx);
    if ((s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) &&
        mt_backend() != METRALE_BACKEND_HOST) {
      print_message("skip: no device (%s)\n", metrale_status_name(s));
      skip();
    }
    MT_OK(s);
    /* The 0.2 default, unless the environment (which overrides) says. */
    if (getenv("METRALE_POOL") == NULL) assert_int_equal(mt_pool_on(ctx), 1);
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc(ctx, 16, &p));
    MT_OK(metrale_free(ctx, p));
    MT_OK(metrale_context_destroy(ctx));
  }
  size_t bad[16];
  const size_t nbad = bad_sizes(OPTIONS_SHIPPED, 2, bad);
  for (size_t j = 0; j < nbad; ++j) {
    metrale_context_options_t o;
    memset(&o, FILL, sizeof o);
    MT_STATUS(metrale_context_options_init_sized(&o, bad[j]), METRALE_ERROR_INVALID_ARGUMENT);
    assert_tail(&o, 0, sizeof o);
    o = mt_options();
    o.struct_size = bad[j];
    metrale_context_t* ctx = NULL;
    MT_STATUS(metrale_context_create(&o, &ctx), METRALE_ERROR_INVALID_ARGUMENT);
    MT_MESSAGE_HAS("struct_size");
    assert_null(ctx);
  }
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(shipped_sizes_are_the_header_s),
      cmocka_unit_test(counters_accept_every_shipped_size),
      cmocka_unit_test(pool_stats_accept_every_shipped_size),
      cmocka_unit_test(options_accept_every_shipped_size),
  };
  return MT_RUN(tests);
}
