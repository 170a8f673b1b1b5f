/* The allocation event log: metrale_event_log_open/close/flush and
 * METRALE_EVENT_LOG; each line's fields (docs/event-log.md), the order of
 * events of one address across threads, scans, sweeps, bad input. */
#include <pthread.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "test_support.h"

/* A log file of its own per case (the suite may run beside other suites). */
static void log_path(char* buf, size_t n, const char* name) {
  snprintf(buf, n, "%s/metrale_event_log_%d_%s.jsonl", P_tmpdir, (int)getpid(), name);
}

typedef struct {
  char** line;
  size_t count;
} lines_t;

static lines_t read_lines(const char* path) {
  lines_t l = {NULL, 0};
  FILE* f = fopen(path, "r");
  assert_non_null(f);
  char* buf = NULL;
  size_t cap = 0;
  ssize_t n;
  while ((n = getline(&buf, &cap, f)) > 0) {
    assert_int_equal(buf[n - 1], '\n'); /* whole lines only */
    l.line = realloc(l.line, (l.count + 1) * sizeof(char*));
    l.line[l.count++] = strdup(buf);
  }
  free(buf);
  fclose(f);
  return l;
}

static void free_lines(lines_t* l) {
  for (size_t i = 0; i < l->count; ++i) free(l->line[i]);
  free(l->line);
}

static size_t count_with(const lines_t* l, const char* a, const char* b) {
  size_t n = 0;
  for (size_t i = 0; i < l->count; ++i) {
    if (strstr(l->line[i], a) != NULL && (b == NULL || strstr(l->line[i], b) != NULL)) ++n;
  }
  return n;
}

static const char* find_with(const lines_t* l, const char* a, const char* b) {
  for (size_t i = 0; i < l->count; ++i) {
    if (strstr(l->line[i], a) != NULL && (b == NULL || strstr(l->line[i], b) != NULL))
      return l->line[i];
  }
  return NULL;
}

static unsigned long long field_u64(const char* line, const char* key) {
  char pat[64];
  snprintf(pat, sizeof pat, "\"%s\":", key);
  const char* p = strstr(line, pat);
  assert_non_null(p);
  p += strlen(pat);
  if (*p == '"') ++p;
  return strtoull(p, NULL, 0);
}

static void lines_name_fields(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "fields");
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_event_log_open(ctx, path));
  metrale_devptr_t a = 0, b = 0, huge = 0;
  MT_OK(metrale_alloc_at(ctx, 1000, "app/model.c", 17, &a));
  MT_OK(metrale_alloc_managed_at(ctx, 2000, "app/\"quoted\".c", 3, &b));
  MT_STATUS(metrale_alloc_at(ctx, (size_t)1 << 62, "app/huge.c", 9, &huge),
            METRALE_ERROR_OUT_OF_MEMORY);
  MT_OK(metrale_free_at(ctx, a, "app/model.c", 40));
  MT_OK((metrale_free)(ctx, b)); /* the function, not the macro: no site */
  MT_OK(metrale_event_log_close(ctx));
  metrale_devptr_t after = 0; /* not logged: the log is closed */
  MT_OK(metrale_alloc(ctx, 64, &after));
  MT_OK(metrale_free(ctx, after));
  const int pooled = mt_pool_on(ctx);
  mt_close(ctx);

  lines_t l = read_lines(path);
  assert_int_equal(l.count, 7); /* open, 2 allocs, oom, 2 frees, close */
  assert_non_null(strstr(l.line[0], "\"ev\":\"open\""));
  assert_non_null(strstr(l.line[0], "\"v\":1"));
  assert_non_null(strstr(l.line[l.count - 1], "\"ev\":\"close\""));
  char ptr[40];
  snprintf(ptr, sizeof ptr, "\"ptr\":\"0x%llx\"", (unsigned long long)a);
  const char* al = find_with(&l, "\"ev\":\"alloc\"", ptr);
  assert_non_null(al);
  assert_non_null(strstr(al, "\"bytes\":1000,"));
  assert_non_null(strstr(al, "\"site\":\"app/model.c:17\""));
  assert_non_null(strstr(al, "\"stream\":\"0x0\""));
  assert_non_null(strstr(al, "\"kind\":\"device\""));
  assert_non_null(strstr(al, "\"tag\":null"));
  assert_non_null(strstr(al, pooled ? "\"pool\":{\"reserved\":" : "\"pool\":null"));
  if (pooled) assert_true(field_u64(al, "in_use") >= 1000);
  const char* fl = find_with(&l, "\"ev\":\"free\"", ptr);
  assert_non_null(fl);
  assert_non_null(strstr(fl, "\"site\":\"app/model.c:17\"")); /* the allocation's site */
  assert_non_null(strstr(fl, "\"free_site\":\"app/model.c:40\""));
  assert_non_null(strstr(fl, "\"sweep\":false"));
  assert_true(field_u64(fl, "seq") > field_u64(al, "seq"));
  assert_true(field_u64(fl, "t_ns") >= field_u64(al, "t_ns"));
  /* The managed one: its kind, its escaped site, a free without a site. */
  const char* ml = find_with(&l, "\"ev\":\"alloc\"", "\"kind\":\"managed\"");
  assert_non_null(ml);
  assert_non_null(strstr(ml, "\"site\":\"app/\\\"quoted\\\".c:3\""));
  assert_non_null(find_with(&l, "\"ev\":\"free\"", "\"free_site\":null"));
  /* The failure: its size and site, no pointer. */
  const char* ol = find_with(&l, "\"ev\":\"oom\"", NULL);
  assert_non_null(ol);
  assert_non_null(strstr(ol, "\"bytes\":4611686018427387904,"));
  assert_non_null(strstr(ol, "\"ptr\":null"));
  assert_non_null(strstr(ol, "\"site\":\"app/huge.c:9\""));
  free_lines(&l);
  unlink(path);
}

static void sites_are_escaped(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "escape");
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_event_log_open(ctx, path));
  metrale_devptr_t p = 0;
  /* A tab, a backslash, UTF-8 (e-acute) and a byte that is not UTF-8. */
  MT_OK(metrale_alloc_at(ctx, 64, "dir\tname\\caf\xc3\xa9\xff.c", 5, &p));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  lines_t l = read_lines(path);
  assert_non_null(
      find_with(&l, "\"ev\":\"alloc\"", "\"site\":\"dir\\u0009name\\\\caf\xc3\xa9\\ufffd.c:5\""));
  free_lines(&l);
  unlink(path);
}

/* An allocation's tag (metrale_tag_push) is on its alloc and its free line,
 * even when the free runs under another tag; untagged ones say null. */
static void tags_are_logged(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "tags");
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_event_log_open(ctx, path));
  metrale_devptr_t tagged = 0, plain = 0;
  MT_OK(metrale_tag_push("encoder.attn \"q\""));
  MT_OK(metrale_alloc_at(ctx, 96, "tagged.c", 1, &tagged));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_alloc_at(ctx, 32, "plain.c", 2, &plain));
  MT_OK(metrale_tag_push("optimizer"));
  MT_OK(metrale_free(ctx, tagged));
  MT_OK(metrale_tag_pop());
  MT_OK(metrale_free(ctx, plain));
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  lines_t l = read_lines(path);
  const char* want = "\"tag\":\"encoder.attn \\\"q\\\"\"";
  assert_non_null(find_with(&l, "\"ev\":\"alloc\"", want));
  assert_non_null(find_with(&l, "\"ev\":\"free\"", want));
  assert_int_equal(count_with(&l, "tagged.c:1", want), 2);
  assert_int_equal(count_with(&l, "plain.c:2", "\"tag\":null"), 2);
  assert_int_equal(count_with(&l, "\"tag\":\"optimizer\"", NULL), 0);
  free_lines(&l);
  unlink(path);
}

static void streams_are_named_by_handle(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "stream");
  /* A created stream, then a wrapped one (NULL: the host backend's stream
   * of its own, cuda's legacy stream). */
  for (int wrapped = 0; wrapped <= 1; ++wrapped) {
    metrale_context_t* ctx = mt_open(NULL);
    metrale_stream_t* s = NULL;
    MT_OK(wrapped ? metrale_stream_wrap(ctx, NULL, &s) : metrale_stream_create(ctx, &s));
    MT_OK(metrale_event_log_open(ctx, path));
    metrale_devptr_t p = 0;
    MT_OK(metrale_alloc_async_at(ctx, 4096, s, "s.c", 1, &p));
    MT_OK(metrale_free_async(ctx, p, s));
    MT_OK(metrale_event_log_flush(ctx)); /* the file has it all before close */
    lines_t l = read_lines(path);
    char want[64];
    snprintf(want, sizeof want, "\"stream\":\"0x%llx\"", (unsigned long long)(uintptr_t)s);
    assert_non_null(find_with(&l, "\"ev\":\"alloc\"", want));
    if (mt_pool_on(ctx)) assert_non_null(find_with(&l, "\"ev\":\"free\"", want));
    free_lines(&l);
    MT_OK(metrale_stream_synchronize(ctx, s));
    MT_OK(metrale_stream_destroy(ctx, s));
    mt_close(ctx);
    unlink(path);
  }
}

static void env_variable_logs_and_destroy_sweeps(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "env");
  setenv("METRALE_EVENT_LOG", path, 1);
  metrale_context_t* ctx = mt_open(NULL);
  unsetenv("METRALE_EVENT_LOG");
  metrale_devptr_t kept = 0;
  MT_OK(metrale_alloc_at(ctx, 512, "leak.c", 5, &kept));
  mt_close(ctx); /* sweeps the leak, then flushes and closes the log */
  lines_t l = read_lines(path);
  assert_int_equal(l.count, 4);
  assert_non_null(strstr(l.line[0], "\"ev\":\"open\""));
  const char* fl = find_with(&l, "\"ev\":\"free\"", "\"sweep\":true");
  assert_non_null(fl);
  assert_non_null(strstr(fl, "\"site\":\"leak.c:5\""));
  assert_non_null(strstr(l.line[3], "\"ev\":\"close\""));
  free_lines(&l);
  unlink(path);

  /* A path that cannot be opened fails the create, naming the variable. */
  setenv("METRALE_EVENT_LOG", "/nonexistent-dir/x/log.jsonl", 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* bad = NULL;
  MT_STATUS(metrale_context_create(&o, &bad), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("METRALE_EVENT_LOG");
  MT_MESSAGE_HAS("/nonexistent-dir/x/log.jsonl");
  assert_null(bad);
  unsetenv("METRALE_EVENT_LOG");
}

static void bad_input(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "bad");
  metrale_context_t* ctx = mt_open(NULL);
  MT_STATUS(metrale_event_log_open(NULL, path), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_log_open(ctx, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_log_open(ctx, ""), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_log_open(ctx, P_tmpdir), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS(P_tmpdir);
  MT_STATUS(metrale_event_log_open(ctx, "/nonexistent-dir/log"), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("No such file");
  MT_OK(metrale_event_log_close(ctx)); /* none open: nothing to do */
  MT_OK(metrale_event_log_flush(ctx));
  MT_OK(metrale_event_log_open(ctx, path));
  /* A second open is refused and the first log keeps working. */
  MT_STATUS(metrale_event_log_open(ctx, path), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("already open");
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 64, &p));
  /* A refused free is not an event. */
  MT_STATUS(metrale_free(ctx, p + 1), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_free(ctx, 0xdead0000), METRALE_ERROR_NOT_FOUND);
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_event_log_close(ctx));
  MT_OK(metrale_event_log_close(ctx));
  lines_t l = read_lines(path);
  assert_int_equal(l.count, 4); /* open, alloc, free, close */
  assert_int_equal(count_with(&l, "\"ev\":\"free\"", NULL), 1);
  free_lines(&l);
  mt_close(ctx);
  MT_STATUS(metrale_event_log_open(ctx, path), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_log_close(ctx), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_event_log_flush(ctx), METRALE_ERROR_INVALID_ARGUMENT);
  unlink(path);
}

static void two_contexts_share_one_file(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "shared");
  metrale_context_t* a = mt_open(NULL);
  metrale_context_t* b = mt_open(NULL);
  MT_OK(metrale_event_log_open(a, path));
  metrale_devptr_t pa = 0, pb = 0;
  MT_OK(metrale_alloc_at(a, 100, "a.c", 1, &pa));
  MT_OK(metrale_event_log_open(b, path)); /* must not truncate a's lines */
  MT_OK(metrale_alloc_at(b, 200, "b.c", 2, &pb));
  MT_OK(metrale_free(a, pa));
  MT_OK(metrale_free(b, pb));
  MT_OK(metrale_event_log_close(a));
  MT_OK(metrale_event_log_close(b));
  lines_t l = read_lines(path);
  assert_int_equal(count_with(&l, "\"ev\":\"open\"", NULL), 2);
  assert_int_equal(count_with(&l, "\"ev\":\"close\"", NULL), 2);
  assert_non_null(find_with(&l, "\"ev\":\"alloc\"", "\"site\":\"a.c:1\""));
  assert_non_null(find_with(&l, "\"ev\":\"alloc\"", "\"site\":\"b.c:2\""));
  assert_int_equal(l.count, 8);
  free_lines(&l);
  mt_close(a);
  mt_close(b);
  unlink(path);
}

static void scans_are_logged(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "scan");
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 32;
  metrale_context_t* ctx = mt_open(&o);
  MT_OK(metrale_event_log_open(ctx, path));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 256, "over.c", 77, &p));
  metrale_redzone_violation_t v[2];
  size_t n = 0;
  MT_OK(metrale_redzone_scan(ctx, v, 2, &n));
  MT_OK(metrale_memset(ctx, p + 256, 0x11, 4)); /* past the end: into the pad */
  MT_STATUS(metrale_redzone_scan(ctx, v, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_OK(metrale_redzone_poison(ctx, 0, UINT64_MAX));
  MT_OK(metrale_free(ctx, p));
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  lines_t l = read_lines(path);
  assert_int_equal(count_with(&l, "\"ev\":\"scan\"", NULL), 2);
  assert_non_null(find_with(&l, "\"scan\":\"redzone\"", "\"violations\":0,\"found\":[]"));
  const char* bad = find_with(&l, "\"scan\":\"redzone\"", "\"violations\":1,");
  assert_non_null(bad);
  assert_non_null(strstr(bad, "\"site\":\"over.c:77\""));
  assert_non_null(strstr(bad, "\"first_bad_offset\":0"));
  free_lines(&l);
  unlink(path);
}

static void quarantine_scans_are_logged(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "quarantine");
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 16;
  o.quarantine_bytes = 1 << 20;
  metrale_context_t* ctx = mt_open(&o);
  MT_OK(metrale_event_log_open(ctx, path));
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc_at(ctx, 512, "uaf.c", 21, &p));
  MT_OK(metrale_free(ctx, p));
  metrale_use_after_free_t u[2];
  size_t n = 0;
  MT_OK(metrale_quarantine_scan(ctx, u, 2, &n));
  MT_OK(metrale_memset(ctx, p + 8, 0x5a, 1)); /* a write after the free */
  MT_STATUS(metrale_quarantine_scan(ctx, u, 2, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  lines_t l = read_lines(path);
  assert_non_null(find_with(&l, "\"scan\":\"quarantine\"", "\"violations\":0,"));
  const char* bad = find_with(&l, "\"scan\":\"quarantine\"", "\"violations\":1,");
  assert_non_null(bad);
  assert_non_null(strstr(bad, "\"site\":\"uaf.c:21\""));
  assert_non_null(strstr(bad, "\"first_bad_offset\":8"));
  free_lines(&l);
  unlink(path);
}

/* A process that never destroys its context (torch's process-wide one)
 * still leaves every line: the writer flushes at exit. */
static void exit_flushes_without_destroy(void** state) {
  (void)state;
  char path[256], parent_path[256];
  log_path(path, sizeof path, "exit");
  log_path(parent_path, sizeof parent_path, "exit_parent");
  /* The parent has lines buffered at the fork: the child must not write them. */
  metrale_context_t* parent = mt_open(NULL);
  MT_OK(metrale_event_log_open(parent, parent_path));
  metrale_devptr_t kept = 0;
  MT_OK(metrale_alloc_at(parent, 64, "parent.c", 1, &kept));
  pid_t pid = fork();
  assert_true(pid >= 0);
  if (pid == 0) {
    /* Host: a CUDA context in a child of a CUDA process is the driver's
     * business (rule 8). */
    metrale_context_options_t o = mt_options();
    o.backend = METRALE_BACKEND_HOST;
    metrale_context_t* ctx = NULL;
    metrale_devptr_t p = 0;
    if (metrale_context_create(&o, &ctx) != METRALE_OK) _exit(3);
    if (metrale_event_log_open(ctx, path) != METRALE_OK) _exit(4);
    if (metrale_alloc_at(ctx, 64, "exit.c", 1, &p) != METRALE_OK) _exit(5);
    exit(0); /* atexit handlers run; the context is never destroyed */
  }
  int status = 0;
  assert_int_equal(waitpid(pid, &status, 0), pid);
  if (WIFEXITED(status) && WEXITSTATUS(status) == 3) skip(); /* no context of this backend */
  assert_true(WIFEXITED(status));
  assert_int_equal(WEXITSTATUS(status), 0);
  lines_t l = read_lines(path);
  assert_int_equal(l.count, 2); /* open, alloc */
  assert_non_null(find_with(&l, "\"ev\":\"alloc\"", "\"site\":\"exit.c:1\""));
  free_lines(&l);
  unlink(path);
  MT_OK(metrale_free(parent, kept));
  mt_close(parent);
  lines_t pl = read_lines(parent_path);
  assert_int_equal(pl.count, 4); /* open, alloc, free, close: once each */
  free_lines(&pl);
  unlink(parent_path);
}

/* Threads allocating and freeing at once: per address, sorted by seq, the
 * events alternate alloc, free, alloc, ... (a free's number is taken before
 * its memory can be handed out again). */
#define THREADS 4
#define ROUNDS 5000
static void* churn(void* arg) {
  metrale_context_t* ctx = arg;
  for (int i = 0; i < ROUNDS; ++i) {
    metrale_devptr_t p = 0;
    if (metrale_alloc_at(ctx, 256, "churn.c", 1, &p) != METRALE_OK) return (void*)1;
    if (metrale_free(ctx, p) != METRALE_OK) return (void*)1;
  }
  return NULL;
}

typedef struct {
  unsigned long long seq, ptr;
  int alloc;
} ev_t;

static int by_ptr_then_seq(const void* a, const void* b) {
  const ev_t* x = a;
  const ev_t* y = b;
  if (x->ptr != y->ptr) return x->ptr < y->ptr ? -1 : 1;
  return x->seq < y->seq ? -1 : x->seq > y->seq;
}

/* Sorted by seq, the alloc and free events of each address alternate,
 * starting with an alloc; want: how many there are. */
static void check_alternation(const char* path, size_t want) {
  lines_t l = read_lines(path);
  ev_t* ev = calloc(l.count, sizeof(ev_t));
  size_t n = 0;
  for (size_t i = 0; i < l.count; ++i) {
    const int is_alloc = strstr(l.line[i], "\"ev\":\"alloc\"") != NULL;
    if (!is_alloc && strstr(l.line[i], "\"ev\":\"free\"") == NULL) continue;
    ev[n].seq = field_u64(l.line[i], "seq");
    ev[n].ptr = field_u64(l.line[i], "ptr");
    ev[n].alloc = is_alloc;
    ++n;
  }
  assert_int_equal(n, want);
  qsort(ev, n, sizeof(ev_t), by_ptr_then_seq);
  for (size_t i = 0; i < n; ++i) {
    const int first = i == 0 || ev[i].ptr != ev[i - 1].ptr;
    const int want_alloc = first || !ev[i - 1].alloc;
    if (ev[i].alloc != want_alloc) {
      fail_msg("address 0x%llx: seq %llu is %s after %s", ev[i].ptr, ev[i].seq,
               ev[i].alloc ? "an alloc" : "a free", first ? "nothing" : "the same kind");
    }
  }
  free(ev);
  free_lines(&l);
}

static void seq_orders_each_address_across_threads(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "threads");
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_event_log_open(ctx, path));
  pthread_t t[THREADS];
  for (int i = 0; i < THREADS; ++i) assert_int_equal(pthread_create(&t[i], NULL, churn, ctx), 0);
  for (int i = 0; i < THREADS; ++i) {
    void* r = NULL;
    pthread_join(t[i], &r);
    assert_null(r);
  }
  /* Megabytes of lines: the writer has written most out already (every
   * 64 KiB), without a flush; at most one buffer's worth waits. */
  FILE* f = fopen(path, "r");
  assert_non_null(f);
  fseek(f, 0, SEEK_END);
  assert_true(ftell(f) > 1000000);
  fclose(f);
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  check_alternation(path, 2 * THREADS * ROUNDS);
  unlink(path);
}

typedef struct {
  metrale_context_t* ctx;
  int sweeps;
} sweeper_t;

/* Sweeps from the allocating thread, at the debug line a large alloc logs
 * after its entry is on the ledger and before the call returns. */
static void sweep_at_alloc_line(metrale_log_level_t level, const char* message, void* user) {
  (void)level;
  sweeper_t* s = user;
  if (strstr(message, "alloc 32") == NULL || strstr(message, "race.c") == NULL) return;
  size_t swept = 0;
  if (metrale_sweep_unreleased(s->ctx, &swept) == METRALE_OK && swept == 1) ++s->sweeps;
}

/* A sweep racing an alloc call that has not returned yet: the sweep's free
 * is numbered after the alloc it frees. */
static void a_sweep_racing_an_alloc_is_numbered_after_it(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "sweep_race");
  metrale_context_t* ctx = mt_open(NULL);
  MT_OK(metrale_event_log_open(ctx, path));
  sweeper_t sw = {ctx, 0};
  MT_OK(metrale_log_set_level(METRALE_LOG_DEBUG));
  MT_OK(metrale_log_set_callback(sweep_at_alloc_line, &sw));
  metrale_devptr_t p = 0;
  const metrale_status_t st = metrale_alloc_at(ctx, 32u << 20, "race.c", 1, &p);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  MT_OK(metrale_log_set_level(METRALE_LOG_WARN));
  MT_OK(st);
  assert_int_equal(sw.sweeps, 1);
  MT_OK(metrale_event_log_close(ctx));
  mt_close(ctx);
  check_alternation(path, 2);
  unlink(path);
}

/* A thread's last calls may come from a pthread key destructor, which runs
 * after the thread's C++ thread_local objects were destroyed (a per-thread
 * cache freeing its device buffers at thread exit). The free still logs its
 * line: no line buffer of the dead thread's is used (it was freed twice:
 * "double free detected", or a write through a destroyed one). */
typedef struct {
  metrale_context_t* ctx;
  pthread_key_t key;
  metrale_status_t at_exit;
} exit_free_t;

static exit_free_t* exit_free_arg;

#define LONG_SITE "a_long_file_name_for_a_long_line_of_the_event_log.c"

static void free_at_thread_exit(void* value) {
  metrale_context_t* ctx = exit_free_arg->ctx;
  /* A line shorter than the thread's longest, then a longer one. */
  metrale_status_t s = metrale_free_at(ctx, (metrale_devptr_t)(uintptr_t)value, "exit.c", 9);
  metrale_devptr_t p = 0;
  if (s == METRALE_OK) s = metrale_alloc_at(ctx, 64, LONG_SITE LONG_SITE LONG_SITE, 3, &p);
  if (s == METRALE_OK) s = metrale_free_at(ctx, p, LONG_SITE LONG_SITE LONG_SITE, 4);
  exit_free_arg->at_exit = s;
}

static void* alloc_then_exit(void* arg) {
  exit_free_t* x = arg;
  metrale_devptr_t p = 0;
  /* Lines of some length before the thread's exit. */
  if (metrale_alloc_at(x->ctx, 64, LONG_SITE, 1, &p) != METRALE_OK) return (void*)1;
  if (metrale_free_at(x->ctx, p, LONG_SITE, 1) != METRALE_OK) return (void*)1;
  if (metrale_alloc_at(x->ctx, 64, "a.c", 2, &p) != METRALE_OK) return (void*)1;
  pthread_setspecific(x->key, (void*)(uintptr_t)p);
  return NULL;
}

static void free_from_a_key_destructor_is_logged(void** state) {
  (void)state;
  char path[256];
  log_path(path, sizeof path, "key_destructor");
  exit_free_t x = {mt_open(NULL), 0, METRALE_ERROR_INTERNAL};
  exit_free_arg = &x;
  MT_OK(metrale_event_log_open(x.ctx, path));
  assert_int_equal(pthread_key_create(&x.key, free_at_thread_exit), 0);
  pthread_t t;
  assert_int_equal(pthread_create(&t, NULL, alloc_then_exit, &x), 0);
  void* r = NULL;
  pthread_join(t, &r);
  assert_null(r);
  pthread_key_delete(x.key);
  MT_OK(x.at_exit);
  MT_OK(metrale_event_log_close(x.ctx));
  mt_ledger_t none = {0, 0};
  MT_LEDGER_SAME(x.ctx, none);
  mt_close(x.ctx);
  lines_t l = read_lines(path);
  assert_non_null(find_with(&l, "\"ev\":\"free\"", "\"free_site\":\"exit.c:9\""));
  assert_non_null(
      find_with(&l, "\"ev\":\"free\"", "\"free_site\":\"" LONG_SITE LONG_SITE LONG_SITE ":4\""));
  free_lines(&l);
  unlink(path);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(lines_name_fields),
      cmocka_unit_test(sites_are_escaped),
      cmocka_unit_test(tags_are_logged),
      cmocka_unit_test(streams_are_named_by_handle),
      cmocka_unit_test(env_variable_logs_and_destroy_sweeps),
      cmocka_unit_test(bad_input),
      cmocka_unit_test(two_contexts_share_one_file),
      cmocka_unit_test(scans_are_logged),
      cmocka_unit_test(quarantine_scans_are_logged),
      cmocka_unit_test(exit_flushes_without_destroy),
      cmocka_unit_test(seq_orders_each_address_across_threads),
      cmocka_unit_test(a_sweep_racing_an_alloc_is_numbered_after_it),
      cmocka_unit_test(free_from_a_key_destructor_is_logged),
  };
  return MT_RUN(tests);
}
