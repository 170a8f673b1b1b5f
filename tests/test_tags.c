/* Allocation tags: the per-thread tag stack, the tag on each ledger entry
 * (driver and pooled allocations), the report by tag, metrale_allocation_tag,
 * the red-zone scan naming the tag, and the bounds on tag text and table. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

static char* report_by_tag(metrale_context_t* ctx, size_t top_n) {
  size_t needed = 0;
  MT_OK(metrale_alloc_report_by_tag(ctx, top_n, 0, NULL, 0, &needed));
  char* buf = malloc(needed);
  assert_non_null(buf);
  MT_OK(metrale_alloc_report_by_tag(ctx, top_n, 0, buf, needed, &needed));
  return buf;
}

static void push_pop_nest(void** state) {
  (void)state;
  assert_null(metrale_tag_current());
  MT_OK(metrale_tag_push("encoder"));
  assert_string_equal(metrale_tag_current(), "encoder");
  MT_OK(metrale_tag_push("encoder.attn"));
  assert_string_equal(metrale_tag_current(), "encoder.attn");
  MT_OK(metrale_tag_pop());
  assert_string_equal(metrale_tag_current(), "encoder");
  MT_OK(metrale_tag_pop());
  assert_null(metrale_tag_current());
  MT_STATUS(metrale_tag_pop(), METRALE_ERROR_INVALID_ARGUMENT);
  assert_non_null(strstr(metrale_last_error_message(), "no tag"));
  assert_null(metrale_tag_current());
}

static void bad_tags_are_refused(void** state) {
  (void)state;
  MT_STATUS(metrale_tag_push(NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_tag_push(""), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_tag_push("line\nbreak"), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_tag_push("del\x7f"), METRALE_ERROR_INVALID_ARGUMENT);
  char longest[METRALE_TAG_MAX_BYTES + 2];
  memset(longest, 'a', sizeof longest);
  longest[METRALE_TAG_MAX_BYTES + 1] = '\0';
  MT_STATUS(metrale_tag_push(longest), METRALE_ERROR_INVALID_ARGUMENT);
  assert_null(metrale_tag_current());  /* nothing pushed by any of them */
  longest[METRALE_TAG_MAX_BYTES] = '\0';  /* exactly the limit: accepted */
  MT_OK(metrale_tag_push(longest));
  assert_int_equal(strlen(metrale_tag_current()), METRALE_TAG_MAX_BYTES);
  MT_OK(metrale_tag_pop());
}

static void stack_depth_is_bounded(void** state) {
  (void)state;
  for (int i = 0; i < METRALE_TAG_MAX_DEPTH; ++i) MT_OK(metrale_tag_push("deep"));
  MT_STATUS(metrale_tag_push("deeper"), METRALE_ERROR_INVALID_ARGUMENT);
  assert_string_equal(metrale_tag_current(), "deep");
  for (int i = 0; i < METRALE_TAG_MAX_DEPTH; ++i) MT_OK(metrale_tag_pop());
  assert_null(metrale_tag_current());
}

/* Every path of metrale_alloc records the tag: pooled (padless fast path),
 * driver (pool off), managed, and stream-ordered. */
static void entries_carry_the_tag(metrale_context_t* ctx) {
  metrale_devptr_t a = 0, b = 0, c = 0, m = 0, s = 0;
  MT_OK(metrale_tag_push("encoder"));
  MT_OK(metrale_alloc(ctx, 4096, &a));
  MT_OK(metrale_alloc_managed(ctx, 256, &m));
  MT_OK(metrale_alloc_async(ctx, 512, NULL, &s));
  MT_OK(metrale_tag_push("decoder"));
  MT_OK(metrale_alloc(ctx, 1024, &b));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_alloc(ctx, 64, &c));
  const char* tag = (const char*)1;
  MT_OK(metrale_allocation_tag(ctx, a, &tag));
  assert_string_equal(tag, "encoder");
  MT_OK(metrale_allocation_tag(ctx, m, &tag));
  assert_string_equal(tag, "encoder");
  MT_OK(metrale_allocation_tag(ctx, s, &tag));
  assert_string_equal(tag, "encoder");
  MT_OK(metrale_allocation_tag(ctx, b, &tag));
  assert_string_equal(tag, "decoder");
  MT_OK(metrale_allocation_tag(ctx, c, &tag));
  assert_null(tag);
  /* Interior, freed and never-allocated pointers. */
  MT_STATUS(metrale_allocation_tag(ctx, a + 8, &tag), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_allocation_tag(ctx, 0, &tag), METRALE_ERROR_NOT_FOUND);
  MT_STATUS(metrale_allocation_tag(ctx, a, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_allocation_tag(NULL, a, &tag), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_free(ctx, b));
  MT_STATUS(metrale_allocation_tag(ctx, b, &tag), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_free(ctx, a));
  MT_OK(metrale_free(ctx, c));
  MT_OK(metrale_free(ctx, m));
  MT_OK(metrale_free_async(ctx, s, NULL));
}

static void entries_carry_the_tag_pooled(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.pool = 1;
  metrale_context_t* ctx = mt_open(&o);
  entries_carry_the_tag(ctx);
  mt_close(ctx);
}

static void entries_carry_the_tag_driver(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  metrale_context_t* ctx = NULL;
  MT_OK(mt_create_without_pool(&o, &ctx));
  entries_carry_the_tag(ctx);
  mt_close(ctx);
}

static void report_groups_by_tag(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  metrale_devptr_t p[6];
  MT_OK(metrale_tag_push("small"));
  MT_OK(metrale_alloc(ctx, 1000, &p[0]));
  MT_OK(metrale_alloc(ctx, 1000, &p[1]));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_tag_push("big"));
  MT_OK(metrale_alloc(ctx, 3u << 20, &p[2]));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_alloc(ctx, 100, &p[3]));
  char* text = report_by_tag(ctx, 0);
  const char* big = strstr(text, "1 allocation tagged big");
  const char* small = strstr(text, "2 allocations tagged small");
  const char* none = strstr(text, "1 allocation untagged");
  assert_non_null(big);
  assert_non_null(small);
  assert_non_null(none);
  assert_true(big < small && small < none); /* most bytes first */
  assert_non_null(strstr(text, "total: "));
  assert_non_null(strstr(text, "in 4 allocations"));
  free(text);
  text = report_by_tag(ctx, 1); /* top 1 */
  assert_non_null(strstr(text, "tagged big"));
  assert_null(strstr(text, "tagged small"));
  assert_non_null(strstr(text, "in 4 allocations")); /* the total counts all */
  free(text);
  /* min_mib: only the 3 MiB tag. */
  char buf[512];
  size_t needed = 0;
  MT_OK(metrale_alloc_report_by_tag(ctx, 0, 1, buf, sizeof buf, &needed));
  assert_non_null(strstr(buf, "tagged big"));
  assert_null(strstr(buf, "tagged small"));
  /* Too small a buffer: truncated, NUL-ended, BUFFER_TOO_SMALL. */
  MT_STATUS(metrale_alloc_report_by_tag(ctx, 0, 0, buf, 8, &needed),
            METRALE_ERROR_BUFFER_TOO_SMALL);
  assert_int_equal(strlen(buf), 7);
  MT_STATUS(metrale_alloc_report_by_tag(ctx, 0, 0, NULL, 0, NULL),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_alloc_report_by_tag(ctx, 0, 0, NULL, 8, &needed),
            METRALE_ERROR_INVALID_ARGUMENT);
  /* Freed memory leaves its tag's line. */
  MT_OK(metrale_free(ctx, p[2]));
  text = report_by_tag(ctx, 0);
  assert_null(strstr(text, "tagged big"));
  assert_non_null(strstr(text, "2 allocations tagged small"));
  free(text);
  MT_OK(metrale_free(ctx, p[0]));
  MT_OK(metrale_free(ctx, p[1]));
  MT_OK(metrale_free(ctx, p[3]));
  text = report_by_tag(ctx, 0);
  assert_null(strstr(text, "tagged"));
  assert_null(strstr(text, "untagged"));
  assert_non_null(strstr(text, "in 0 allocations"));
  free(text);
  mt_close(ctx);
}

struct untagged_arg {
  metrale_context_t* ctx;
  metrale_devptr_t ptr;
  const char* seen;
};

static void* alloc_on_other_thread(void* p) {
  struct untagged_arg* a = p;
  a->seen = metrale_tag_current();
  if (metrale_alloc(a->ctx, 128, &a->ptr) != METRALE_OK) a->ptr = 0;
  return NULL;
}

static void tags_are_per_thread(void** state) {
  (void)state;
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_tag_push("main-only"));
  struct untagged_arg arg = {ctx, 0, (const char*)1};
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, alloc_on_other_thread, &arg), 0);
  assert_int_equal(pthread_join(t, NULL), 0);
  MT_OK(metrale_tag_pop());
  assert_null(arg.seen);
  assert_int_not_equal(arg.ptr, 0);
  const char* tag = (const char*)1;
  MT_OK(metrale_allocation_tag(ctx, arg.ptr, &tag));
  assert_null(tag);
  MT_OK(metrale_free(ctx, arg.ptr));
  mt_close(ctx);
}

/* The scan's message names the overwritten allocation's tag and site. */
static void scan_names_the_tag(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0, q = 0;
  MT_OK(metrale_tag_push("layer3.mlp"));
  MT_OK(metrale_alloc(ctx, 256, &p));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_alloc(ctx, 256, &q));
  MT_OK(mt_overflow_write(ctx, p, 256, 4, 0x11223344u));
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  assert_int_equal(v[0].ptr, p);
  assert_non_null(strstr(metrale_last_error_message(), "tag layer3.mlp"));
  assert_non_null(strstr(metrale_last_error_message(), "test_tags.c"));
  const char* tag = NULL;
  MT_OK(metrale_allocation_tag(ctx, v[0].ptr, &tag));
  assert_string_equal(tag, "layer3.mlp");
  /* An untagged overflow: no tag in the message. */
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  MT_OK(mt_overflow_write(ctx, q, 256, 4, 0x11223344u));
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_null(strstr(metrale_last_error_message(), ", tag "));
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_free(ctx, q));
  mt_close(ctx);
}

/* A free the driver refuses puts the entry back with its tag, and the
 * tag's line of the report counts it again (host backend's fail hook). */
static void refused_free_keeps_the_tag(void** state) {
  (void)state;
  if (mt_backend() != METRALE_BACKEND_HOST) skip();
  setenv("METRALE_TEST_HOST_FAIL_FREE", "1", 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* ctx = NULL;
  metrale_status_t st = mt_create_without_pool(&o, &ctx);
  unsetenv("METRALE_TEST_HOST_FAIL_FREE");
  MT_OK(st);
  metrale_devptr_t p = 0;
  MT_OK(metrale_tag_push("kept"));
  MT_OK(metrale_alloc(ctx, 2048, &p));
  MT_OK(metrale_tag_pop());
  MT_STATUS(metrale_free(ctx, p), METRALE_ERROR_DRIVER);
  const char* tag = NULL;
  MT_OK(metrale_allocation_tag(ctx, p, &tag));
  assert_string_equal(tag, "kept");
  char* text = report_by_tag(ctx, 0);
  assert_non_null(strstr(text, "2.0 KiB in 1 allocation tagged kept"));
  free(text);
  MT_OK(metrale_free(ctx, p)); /* the next free goes through */
  text = report_by_tag(ctx, 0);
  assert_null(strstr(text, "tagged kept"));
  free(text);
  mt_close(ctx);
}

/* Tags live for the process: ever new names stop at the table's bound
 * with INVALID_ARGUMENT, and names already held keep working. Runs last:
 * it fills the process's table. */
static void table_is_bounded(void** state) {
  (void)state;
  MT_OK(metrale_tag_push("kept-before"));
  MT_OK(metrale_tag_pop());
  char name[64];
  int refused_at = -1;
  for (int i = 0; i <= METRALE_TAG_MAX_TAGS; ++i) {
    snprintf(name, sizeof name, "step-%d", i);
    metrale_status_t s = metrale_tag_push(name);
    if (s != METRALE_OK) {
      assert_int_equal(s, METRALE_ERROR_INVALID_ARGUMENT);
      assert_non_null(strstr(metrale_last_error_message(), "too many distinct tags"));
      refused_at = i;
      break;
    }
    MT_OK(metrale_tag_pop());
  }
  assert_true(refused_at > 1000);
  assert_null(metrale_tag_current());
  MT_OK(metrale_tag_push("kept-before"));
  assert_string_equal(metrale_tag_current(), "kept-before");
  MT_OK(metrale_tag_pop());
}

/* A pthread key destructor runs after the thread's C++ thread_local objects
 * were destroyed (a per-thread cache releasing what it holds at thread
 * exit); tags pushed and popped there nest as anywhere else, and the stack
 * of the thread's earlier pushes left nothing freed to write through (it
 * was a destroyed vector; AddressSanitizer: heap-use-after-free). */
static pthread_key_t exit_key;
static int exit_nesting_ok;

static void tags_at_thread_exit(void* value) {
  (void)value;
  const char* current = NULL;
  exit_nesting_ok = metrale_tag_push("encoder") == METRALE_OK &&
                    metrale_tag_push("encoder.attn") == METRALE_OK &&
                    metrale_tag_push("encoder") == METRALE_OK &&
                    metrale_tag_pop() == METRALE_OK &&
                    (current = metrale_tag_current()) != NULL &&
                    strcmp(current, "encoder.attn") == 0 && metrale_tag_pop() == METRALE_OK &&
                    (current = metrale_tag_current()) != NULL &&
                    strcmp(current, "encoder") == 0 && metrale_tag_pop() == METRALE_OK &&
                    metrale_tag_current() == NULL &&
                    metrale_tag_pop() == METRALE_ERROR_INVALID_ARGUMENT;
}

static void* push_pop_then_exit(void* arg) {
  (void)arg;
  /* The thread's stack held three tags before its exit. */
  for (int i = 0; i < 3; ++i) {
    if (metrale_tag_push("encoder") != METRALE_OK) return (void*)1;
  }
  for (int i = 0; i < 3; ++i) {
    if (metrale_tag_pop() != METRALE_OK) return (void*)1;
  }
  pthread_setspecific(exit_key, (void*)1);
  return NULL;
}

static void tags_nest_at_thread_exit(void** state) {
  (void)state;
  exit_nesting_ok = 0;
  assert_int_equal(pthread_key_create(&exit_key, tags_at_thread_exit), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, push_pop_then_exit, NULL), 0);
  void* r = (void*)1;
  assert_int_equal(pthread_join(t, &r), 0);
  pthread_key_delete(exit_key);
  assert_null(r);
  assert_true(exit_nesting_ok);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(push_pop_nest),
      cmocka_unit_test(bad_tags_are_refused),
      cmocka_unit_test(stack_depth_is_bounded),
      cmocka_unit_test(entries_carry_the_tag_pooled),
      cmocka_unit_test(entries_carry_the_tag_driver),
      cmocka_unit_test(report_groups_by_tag),
      cmocka_unit_test(tags_are_per_thread),
      cmocka_unit_test(scan_names_the_tag),
      cmocka_unit_test(refused_free_keeps_the_tag),
      cmocka_unit_test(tags_nest_at_thread_exit),
      cmocka_unit_test(table_is_bounded),
  };
  return MT_RUN(tests);
}
