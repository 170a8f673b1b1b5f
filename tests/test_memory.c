/* Allocation, the ledger (sites, sequence, kinds, sizes), arenas, the text
 * report and the sweep. */
#include <stdlib.h>
#include <strings.h>

#include "test_support.h"

static metrale_allocation_t only_allocation(metrale_context_t* ctx, size_t index, size_t live) {
  metrale_allocation_t a[8];
  size_t n = 0;
  assert_true(live <= 8);
  MT_OK(metrale_live_allocations(ctx, a, 8, &n));
  assert_int_equal(n, live);
  return a[index];
}

/* --- sites and sequence ---------------------------------------------------- */

static void two_call_sites_are_recorded(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t a = 0, b = 0;
  MT_OK(metrale_alloc_at(ctx, 100, "site_a.c", 11, &a));
  int line_b = __LINE__; MT_OK(metrale_alloc(ctx, 200, &b));
  assert_true(a != 0 && b != 0 && a != b);

  metrale_allocation_t first = only_allocation(ctx, 0, 2);
  metrale_allocation_t second = only_allocation(ctx, 1, 2);
  assert_int_equal(first.ptr, a);
  assert_int_equal(first.bytes, 100);
  assert_int_equal(first.seq, 0);
  assert_string_equal(first.file, "site_a.c");
  assert_int_equal(first.line, 11);
  assert_int_equal(first.kind, METRALE_ALLOC_DEVICE);
  assert_int_equal(first.redzone_bytes, 0);
  assert_int_equal(second.ptr, b);
  assert_int_equal(second.bytes, 200);
  assert_int_equal(second.seq, 1);
  assert_string_equal(second.file, __FILE__);
  assert_int_equal(second.line, line_b);
  assert_int_equal(second.kind, METRALE_ALLOC_DEVICE);

  MT_OK(metrale_free(ctx, a));
  metrale_allocation_t left = only_allocation(ctx, 0, 1);
  assert_int_equal(left.ptr, b);
  MT_OK(metrale_free(ctx, b));
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

static void site_file_is_copied(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  char file[32];
  snprintf(file, sizeof file, "%s", "transient_site.c");
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 64, file, 5, &p));
  memset(file, 'X', sizeof file - 1);
  metrale_allocation_t a = only_allocation(ctx, 0, 1);
  assert_string_equal(a.file, "transient_site.c");
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void seq_is_never_reused(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_alloc(ctx, 64, &p));
  assert_int_equal(only_allocation(ctx, 0, 1).seq, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void data_round_trips(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  enum { N = 4096 };
  unsigned char src[N];
  for (int i = 0; i < N; ++i) src[i] = (unsigned char)(i * 7 + 3);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, N, &p));
  MT_OK(metrale_copy_h2d(ctx, src, N, p));
  unsigned char* got = mt_read_device(ctx, p, N);
  assert_memory_equal(got, src, N);
  free(got);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

/* --- managed and arena ------------------------------------------------------ */

static void managed_is_on_ledger_with_kind(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64; /* managed memory never gets a pad */
  metrale_context_t* ctx = mt_open(&o);
  metrale_devptr_t m = 0;
  int line = __LINE__; MT_OK(metrale_alloc_managed(ctx, 256, &m));
  metrale_allocation_t a = only_allocation(ctx, 0, 1);
  assert_int_equal(a.ptr, m);
  assert_int_equal(a.bytes, 256);
  assert_int_equal(a.kind, METRALE_ALLOC_MANAGED);
  assert_int_equal(a.redzone_bytes, 0);
  assert_string_equal(a.file, __FILE__);
  assert_int_equal(a.line, line);
  unsigned char src[256];
  for (int i = 0; i < 256; ++i) src[i] = (unsigned char)(255 - i);
  MT_OK(metrale_copy_h2d(ctx, src, 256, m));
  unsigned char* got = mt_read_device(ctx, m, 256);
  assert_memory_equal(got, src, 256);
  free(got);
  MT_OK(metrale_free(ctx, m));
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

static void arena_is_not_on_ledger(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_counters_t before_c = mt_counters(ctx);
  mt_ledger_t before = mt_ledger(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_arena(ctx, 1 << 16, &p));
  assert_true(p != 0);
  MT_LEDGER_SAME(ctx, before);
  size_t n = 99;
  MT_OK(metrale_live_allocations(ctx, NULL, 0, &n));
  assert_int_equal(n, 0);
  assert_int_equal(mt_counters(ctx).allocs, before_c.allocs);
  /* Usable memory. */
  uint32_t v[16];
  for (int i = 0; i < 16; ++i) v[i] = 0xC0DE0000u + (uint32_t)i;
  MT_OK(metrale_copy_h2d(ctx, v, sizeof v, p + 1024));
  uint32_t* got = mt_read_device(ctx, p + 1024, sizeof v);
  assert_memory_equal(got, v, sizeof v);
  free(got);
  /* Not a ledger pointer. */
  MT_STATUS(metrale_free(ctx, p), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_free_arena(ctx, p));
  MT_STATUS(metrale_free_arena(ctx, p), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_free_arena(ctx, 0));
  MT_LEDGER_SAME(ctx, before);
  mt_close(ctx);
}

static void arena_bad_sizes(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_STATUS(metrale_alloc_arena(ctx, 0, &p), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_alloc_arena(ctx, (size_t)1 << 40, &p), METRALE_ERROR_OUT_OF_MEMORY);
  assert_int_equal(p, 0);
  mt_close(ctx);
}

/* --- sizes -------------------------------------------------------------------- */

static void live_bytes_and_count_follow_allocations(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  mt_ledger_t l = mt_ledger(ctx);
  assert_int_equal(l.count, 0);
  assert_int_equal(l.bytes, 0);
  metrale_devptr_t p[3];
  MT_OK(metrale_alloc(ctx, 10, &p[0]));
  MT_OK(metrale_alloc(ctx, 20, &p[1]));
  MT_OK(metrale_alloc_managed(ctx, 30, &p[2]));
  l = mt_ledger(ctx);
  assert_int_equal(l.count, 3);
  assert_int_equal(l.bytes, 60);
  MT_OK(metrale_free(ctx, p[1]));
  l = mt_ledger(ctx);
  assert_int_equal(l.count, 2);
  assert_int_equal(l.bytes, 40);
  MT_OK(metrale_free(ctx, p[0]));
  MT_OK(metrale_free(ctx, p[2]));
  l = mt_ledger(ctx);
  assert_int_equal(l.count, 0);
  assert_int_equal(l.bytes, 0);
  mt_close(ctx);
}

static size_t slack_of_one(size_t bytes, size_t redzone) {
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = redzone;
  metrale_context_t* ctx = mt_open(&o);
  size_t slack = 1;
  MT_OK(metrale_chunk_slack_bytes(ctx, &slack));
  assert_int_equal(slack, 0);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, bytes, &p));
  MT_OK(metrale_chunk_slack_bytes(ctx, &slack));
  size_t with_alloc = slack;
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_chunk_slack_bytes(ctx, &slack));
  assert_int_equal(slack, 0);
  mt_close(ctx);
  return with_alloc;
}

static void slack_excludes_redzone_pads(void** state) {
  (void)state;
  size_t plain = slack_of_one(100, 0);
  size_t padded = slack_of_one(100, 4096);
  /* A pad counted as slack would add 4096. */
  assert_true(padded <= plain);
}

static void live_allocations_size_query_and_short_buffer(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p[3];
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc(ctx, 16 * (size_t)(i + 1), &p[i]));
  size_t n = 0;
  MT_OK(metrale_live_allocations(ctx, NULL, 0, &n));
  assert_int_equal(n, 3);
  metrale_allocation_t two[2];
  memset(two, 0, sizeof two);
  n = 0;
  MT_STATUS(metrale_live_allocations(ctx, two, 2, &n), METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(n, 3);
  assert_int_equal(two[0].ptr, p[0]);
  assert_int_equal(two[0].seq, 0);
  assert_int_equal(two[1].ptr, p[1]);
  assert_int_equal(two[1].bytes, 32);
  for (int i = 0; i < 3; ++i) MT_OK(metrale_free(ctx, p[i]));
  mt_close(ctx);
}

/* --- report ---------------------------------------------------------------------- */

static char* full_report(metrale_context_t* ctx, size_t top_n, size_t min_mib) {
  size_t needed = 0;
  MT_OK(metrale_alloc_report(ctx, top_n, min_mib, NULL, 0, &needed));
  assert_true(needed >= 1);
  char* buf = malloc(needed);
  assert_non_null(buf);
  size_t again = 0;
  MT_OK(metrale_alloc_report(ctx, top_n, min_mib, buf, needed, &again));
  assert_int_equal(again, needed);
  assert_int_equal(strlen(buf) + 1, needed);
  return buf;
}

static void alloc_report_groups_sites_largest_first(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t big[2], small = 0;
  MT_OK(metrale_alloc_at(ctx, 1 << 20, "big_site.c", 10, &big[0]));
  MT_OK(metrale_alloc_at(ctx, 1 << 20, "big_site.c", 10, &big[1]));
  MT_OK(metrale_alloc_at(ctx, 4096, "small_site.c", 20, &small));

  char* all = full_report(ctx, 0, 0);
  const char* b = strstr(all, "big_site.c");
  const char* s = strstr(all, "small_site.c");
  if (b == NULL || s == NULL || b > s || strcasestr(all, "total") == NULL) {
    print_error("report:\n%s\n", all);
    fail();
  }
  /* Allocations of one site are grouped: the site appears once. */
  assert_null(strstr(b + 1, "big_site.c"));
  free(all);

  char* top1 = full_report(ctx, 1, 0);
  assert_non_null(strstr(top1, "big_site.c"));
  assert_null(strstr(top1, "small_site.c"));
  free(top1);

  char* min1 = full_report(ctx, 0, 1);
  assert_non_null(strstr(min1, "big_site.c"));
  assert_null(strstr(min1, "small_site.c"));
  free(min1);

  MT_OK(metrale_free(ctx, big[0]));
  MT_OK(metrale_free(ctx, big[1]));
  MT_OK(metrale_free(ctx, small));
  mt_close(ctx);
}

static void alloc_report_short_buffer(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 12345, "report_site.c", 1, &p));
  char* all = full_report(ctx, 0, 0);
  size_t needed = strlen(all) + 1;
  assert_true(needed > 8);
  char small[8];
  memset(small, 'Z', sizeof small);
  size_t got = 0;
  MT_STATUS(metrale_alloc_report(ctx, 0, 0, small, sizeof small, &got),
            METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(got, needed);
  assert_non_null(memchr(small, '\0', sizeof small)); /* NUL-ended */
  assert_true(strncmp(small, all, strlen(small)) == 0); /* a prefix of the text */
  free(all);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void alloc_report_empty_ledger(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  char* all = full_report(ctx, 0, 0);
  assert_non_null(strcasestr(all, "total"));
  free(all);
  mt_close(ctx);
}

/* --- sweep ------------------------------------------------------------------------ */

static void sweep_frees_everything(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0;
  for (int i = 0; i < 3; ++i) MT_OK(metrale_alloc(ctx, 128, &p));
  MT_OK(metrale_alloc_managed(ctx, 128, &p));
  size_t count = 0;
  MT_OK(metrale_sweep_unreleased(ctx, &count));
  assert_int_equal(count, 4);
  mt_ledger_t l = mt_ledger(ctx);
  assert_int_equal(l.count, 0);
  assert_int_equal(l.bytes, 0);
  /* Swept pointers are gone. */
  MT_STATUS(metrale_free(ctx, p), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_sweep_unreleased(ctx, &count));
  assert_int_equal(count, 0);
  MT_OK(metrale_alloc(ctx, 128, &p));
  MT_OK(metrale_sweep_unreleased(ctx, NULL));
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

/* --- refusals --------------------------------------------------------------------- */

static void free_refusals_leave_ledger(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_alloc_at(ctx, 256, "interior_site.c", 42, &p));
  MT_OK(metrale_alloc(ctx, 64, &q));
  MT_OK(metrale_free(ctx, q));
  mt_ledger_t before = mt_ledger(ctx);
  MT_STATUS(metrale_free(ctx, q), METRALE_ERROR_NOT_FOUND); /* double free */
  MT_LEDGER_SAME(ctx, before);
  MT_STATUS(metrale_free(ctx, 0xdead0000ull), METRALE_ERROR_NOT_FOUND);
  MT_LEDGER_SAME(ctx, before);
  MT_STATUS(metrale_free(ctx, p + 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("interior_site.c");
  MT_LEDGER_SAME(ctx, before);
  MT_OK(metrale_free(ctx, 0));
  MT_LEDGER_SAME(ctx, before);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

static void zero_bytes_is_invalid(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p = 0x1234;
  MT_STATUS(metrale_alloc(ctx, 0, &p), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_alloc_managed(ctx, 0, &p), METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(p, 0x1234); /* out untouched */
  assert_int_equal(mt_ledger(ctx).count, 0);
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(two_call_sites_are_recorded),
      cmocka_unit_test(site_file_is_copied),
      cmocka_unit_test(seq_is_never_reused),
      cmocka_unit_test(data_round_trips),
      cmocka_unit_test(managed_is_on_ledger_with_kind),
      cmocka_unit_test(arena_is_not_on_ledger),
      cmocka_unit_test(arena_bad_sizes),
      cmocka_unit_test(live_bytes_and_count_follow_allocations),
      cmocka_unit_test(slack_excludes_redzone_pads),
      cmocka_unit_test(live_allocations_size_query_and_short_buffer),
      cmocka_unit_test(alloc_report_groups_sites_largest_first),
      cmocka_unit_test(alloc_report_short_buffer),
      cmocka_unit_test(alloc_report_empty_ledger),
      cmocka_unit_test(sweep_frees_everything),
      cmocka_unit_test(free_refusals_leave_ledger),
      cmocka_unit_test(zero_bytes_is_invalid),
  };
  return MT_RUN(tests);
}
