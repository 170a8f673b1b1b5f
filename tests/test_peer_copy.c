/* Peer access and copies between the allocations of two contexts:
 * metrale_peer_access_query/enable, metrale_copy_peer and
 * metrale_copy_peer_async. Two devices on the host backend (main sets
 * METRALE_HOST_DEVICES=4 unless the caller set it); on a machine with one
 * GPU the cases between two contexts of that device still run (the
 * self-peer path), those that need two devices skip. */
#include <pthread.h>
#include <stdlib.h>

#include "test_support.h"

static int device_count(void) {
  int n = 0;
  MT_OK(metrale_device_count(mt_backend(), &n));
  return n;
}

static metrale_context_t* open_on(int d, int checked) {
  metrale_context_options_t o = mt_options();
  o.device = d;
  o.checked_pointers = checked;
  return mt_open(&o);
}

/* The second device when there is one, else device 0 (two contexts of one
 * device: the copy is the same call, the driver's same-context path). */
static int other_device(void) { return device_count() >= 2 ? 1 : 0; }

static void need_devices(int n) {
  const int have = device_count();
  if (have < n) {
    print_message("skip: %d devices needed, the %s backend has %d\n", n, mt_backend_name(), have);
    skip();
  }
}

static void fill_pattern(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes, unsigned seed) {
  unsigned char* h = malloc(bytes);
  for (size_t i = 0; i < bytes; ++i) h[i] = (unsigned char)(i * 31u + seed);
  MT_OK(metrale_copy_h2d(ctx, h, bytes, p));
  free(h);
}

static void expect_pattern(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes,
                           unsigned seed) {
  unsigned char* got = mt_read_device(ctx, p, bytes);
  for (size_t i = 0; i < bytes; ++i) {
    if (got[i] != (unsigned char)(i * 31u + seed)) {
      print_error("byte %zu is %u, expected %u\n", i, got[i], (unsigned char)(i * 31u + seed));
      fail();
    }
  }
  free(got);
}

static void expect_bytes(metrale_context_t* ctx, metrale_devptr_t p, size_t bytes, unsigned v) {
  unsigned char* got = mt_read_device(ctx, p, bytes);
  for (size_t i = 0; i < bytes; ++i) assert_int_equal(got[i], v);
  free(got);
}

static void copy_between_two_devices(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(other_device(), 0);
  const size_t n = 1u << 20;
  metrale_devptr_t src = 0, dst = 0, back = 0;
  MT_OK(metrale_alloc(a, n, &src));
  MT_OK(metrale_alloc(b, n, &dst));
  MT_OK(metrale_alloc(a, n, &back));
  fill_pattern(a, src, n, 7);
  MT_OK(metrale_memset(b, dst, 0, n));
  MT_OK(metrale_copy_peer(a, src, b, dst, n));
  expect_pattern(b, dst, n, 7);
  /* And back, asynchronously on a stream of the source context (b). */
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(b, &s));
  MT_OK(metrale_memset(a, back, 0, n));
  MT_OK(metrale_copy_peer_async(b, dst + 16, a, back + 32, n - 64, s));
  MT_OK(metrale_stream_synchronize(b, s));
  unsigned char* got = mt_read_device(a, back, n);
  for (size_t i = 0; i < 32; ++i) assert_int_equal(got[i], 0);
  for (size_t i = 0; i < n - 64; ++i) assert_int_equal(got[32 + i], (unsigned char)((i + 16) * 31u + 7));
  for (size_t i = n - 32; i < n; ++i) assert_int_equal(got[i], 0);
  free(got);
  MT_OK(metrale_stream_destroy(b, s));
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(a, back));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

static void counted_and_traced_in_the_source_context(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 4096, &src));
  MT_OK(metrale_alloc(b, 4096, &dst));
  MT_OK(metrale_counters_reset(a));
  MT_OK(metrale_counters_reset(b));
  MT_OK(metrale_launch_trace_enable(a, 1));
  MT_OK(metrale_launch_trace_enable(b, 1));
  MT_OK(metrale_copy_peer_async(a, src, b, dst, 1000, NULL));
  MT_OK(metrale_stream_synchronize(a, NULL));
  metrale_counters_t ca = mt_counters(a), cb = mt_counters(b);
  assert_int_equal(ca.d2d_copies, 1);
  assert_int_equal(ca.d2d_bytes, 1000);
  assert_int_equal(cb.d2d_copies, 0);
  assert_int_equal(cb.d2d_bytes, 0);
  metrale_trace_entry_t t[4];
  size_t count = 0;
  MT_OK(metrale_launch_trace_read(a, t, 4, &count));
  assert_int_equal(count, 1);
  assert_int_equal(t[0].kind, METRALE_TRACE_D2D);
  assert_int_equal(t[0].args[0], src);
  assert_int_equal(t[0].args[1], dst);
  assert_int_equal(t[0].args[2], 1000);
  MT_OK(metrale_launch_trace_read(b, t, 4, &count));
  assert_int_equal(count, 0);
  /* Zero bytes: OK, nothing counted. */
  MT_OK(metrale_copy_peer(a, src, b, dst, 0));
  MT_OK(metrale_copy_peer_async(a, src, b, dst, 0, NULL));
  assert_int_equal(mt_counters(a).d2d_copies, 1);
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

static void one_context_is_a_plain_copy(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_devptr_t x = 0, y = 0;
  MT_OK(metrale_alloc(a, 8192, &x));
  MT_OK(metrale_alloc(a, 8192, &y));
  fill_pattern(a, x, 8192, 3);
  MT_OK(metrale_copy_peer(a, x, a, y, 8192));
  expect_pattern(a, y, 8192, 3);
  MT_OK(metrale_memset(a, y, 0, 8192));
  MT_OK(metrale_copy_peer_async(a, x, a, y, 8192, NULL));
  MT_OK(metrale_stream_synchronize(a, NULL));
  expect_pattern(a, y, 8192, 3);
  int can = -1;
  MT_OK(metrale_peer_access_query(a, a, &can));
  assert_int_equal(can, 1);
  MT_OK(metrale_peer_access_enable(a, a));
  MT_OK(metrale_free(a, x));
  MT_OK(metrale_free(a, y));
  mt_close(a);
}

/* Checked pointers: each range against its own context's ledger, both
 * before a byte moves; a failed copy moved nothing and counted nothing. */
static void ranges_checked_against_both_ledgers(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 1);
  metrale_context_t* b = open_on(other_device(), 1);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 4096, &src));
  MT_OK(metrale_alloc(b, 4096, &dst));
  fill_pattern(a, src, 4096, 1);
  MT_OK(metrale_memset(b, dst, 0xEE, 4096));
  MT_OK(metrale_counters_reset(a));
  MT_STATUS(metrale_copy_peer(a, src + 1, b, dst, 4096), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_MESSAGE_HAS("source");
  MT_STATUS(metrale_copy_peer(a, src, b, dst + 1, 4096), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_MESSAGE_HAS("peer context");
  MT_STATUS(metrale_copy_peer_async(a, src, b, dst + 8, 4096, NULL), METRALE_ERROR_OUT_OF_BOUNDS);
  /* The ranges swapped: src is not b's memory, dst not a's. */
  MT_STATUS(metrale_copy_peer(a, dst, b, src, 16), METRALE_ERROR_OUT_OF_BOUNDS);
  /* A size that wraps the address space. */
  MT_STATUS(metrale_copy_peer(a, src, b, dst, (size_t)-1), METRALE_ERROR_OUT_OF_BOUNDS);
  MT_STATUS(metrale_copy_peer_async(a, src + 64, b, dst, (size_t)-64, NULL),
            METRALE_ERROR_OUT_OF_BOUNDS);
  assert_int_equal(mt_counters(a).d2d_copies, 0);
  expect_bytes(b, dst, 4096, 0xEE);
  /* In bounds it copies. */
  MT_OK(metrale_copy_peer(a, src, b, dst, 4096));
  expect_pattern(b, dst, 4096, 1);
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

/* Without checked pointers the host backend still refuses a range outside
 * its device's memory, each against its own device. */
static void host_refuses_foreign_ranges(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  mt_require_host(a);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 4096, &src));
  MT_OK(metrale_alloc(b, 4096, &dst));
  MT_OK(metrale_memset(b, dst, 0xAB, 4096));
  MT_OK(metrale_counters_reset(a));
  /* dst belongs to b: as a source in a it is foreign. */
  MT_STATUS(metrale_copy_peer(a, dst, b, dst, 64), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer(a, src, b, src, 64), METRALE_ERROR_INVALID_ARGUMENT);
  /* Host memory no device allocated (the pool's chunks are larger than a
   * block, so a range just past a block may still be device memory). */
  unsigned char local[64];
  MT_STATUS(metrale_copy_peer_async(a, src, b, (metrale_devptr_t)(uintptr_t)local, 64, NULL),
            METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer_async(a, (metrale_devptr_t)(uintptr_t)local, b, dst, 64, NULL),
            METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(mt_counters(a).d2d_copies, 0);
  expect_bytes(b, dst, 4096, 0xAB);
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

static void dead_handles_are_refused(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_context_t* dead = open_on(0, 0);
  mt_close(dead);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 256, &src));
  MT_OK(metrale_alloc(b, 256, &dst));
  MT_STATUS(metrale_copy_peer(NULL, src, b, dst, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer(a, src, NULL, dst, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer(dead, src, b, dst, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer(a, src, dead, dst, 16), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer_async(a, src, dead, dst, 16, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_copy_peer((metrale_context_t*)(uintptr_t)0x1234, src, b, dst, 16),
            METRALE_ERROR_INVALID_ARGUMENT);
  /* The stream belongs to the source context. */
  metrale_stream_t* sb = NULL;
  MT_OK(metrale_stream_create(b, &sb));
  MT_STATUS(metrale_copy_peer_async(a, src, b, dst, 16, sb), METRALE_ERROR_INVALID_ARGUMENT);
  MT_MESSAGE_HAS("stream");
  MT_OK(metrale_stream_destroy(b, sb));
  metrale_stream_t* sa = NULL;
  MT_OK(metrale_stream_create(a, &sa));
  MT_OK(metrale_stream_destroy(a, sa));
  MT_STATUS(metrale_copy_peer_async(a, src, b, dst, 16, sa), METRALE_ERROR_INVALID_ARGUMENT);
  int can = 5;
  MT_STATUS(metrale_peer_access_query(a, dead, &can), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_peer_access_query(dead, a, &can), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_peer_access_query(a, b, NULL), METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(can, 5);
  MT_STATUS(metrale_peer_access_enable(a, dead), METRALE_ERROR_INVALID_ARGUMENT);
  MT_STATUS(metrale_peer_access_enable(NULL, a), METRALE_ERROR_INVALID_ARGUMENT);
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

/* A peer copy is never recorded into a graph. */
static void refused_while_capturing(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 4096, &src));
  MT_OK(metrale_alloc(b, 4096, &dst));
  MT_OK(metrale_memset(a, src, 0x5A, 4096));
  MT_OK(metrale_memset(b, dst, 0, 4096));
  metrale_stream_t* s = NULL;
  MT_OK(metrale_stream_create(a, &s));
  MT_OK(metrale_counters_reset(a));
  MT_OK(metrale_graph_begin_capture(a, s));
  MT_STATUS(metrale_copy_peer_async(a, src, b, dst, 4096, s), METRALE_ERROR_CAPTURE);
  MT_MESSAGE_HAS("never recorded");
  metrale_graph_t* g = NULL;
  MT_OK(metrale_graph_end_capture(a, s, &g));
  MT_OK(metrale_graph_launch(a, g, s));
  MT_OK(metrale_stream_synchronize(a, s));
  expect_bytes(b, dst, 4096, 0);
  assert_int_equal(mt_counters(a).d2d_copies, 0);
  MT_OK(metrale_graph_destroy(a, g));
  /* The synchronous form while the default stream captures. */
  MT_OK(metrale_graph_begin_capture(a, NULL));
  MT_STATUS(metrale_copy_peer(a, src, b, dst, 4096), METRALE_ERROR_CAPTURE);
  MT_OK(metrale_graph_abort_capture(a, NULL));
  MT_OK(metrale_copy_peer(a, src, b, dst, 4096));
  expect_bytes(b, dst, 4096, 0x5A);
  MT_OK(metrale_stream_destroy(a, s));
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  mt_close(a);
  mt_close(b);
}

static void peer_access_between_two_devices(void** state) {
  (void)state;
  need_devices(2);
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(1, 0);
  int can = -1;
  MT_OK(metrale_peer_access_query(a, b, &can));
  if (can == 0) {
    /* Refused on this machine: the enable must say why. */
    MT_STATUS(metrale_peer_access_enable(a, b), METRALE_ERROR_UNSUPPORTED);
    print_message("peer access 0 -> 1 refused: %s\n", metrale_last_error_message());
  } else {
    MT_OK(metrale_peer_access_enable(a, b));
    MT_OK(metrale_peer_access_enable(a, b)); /* already enabled: OK */
    MT_OK(metrale_peer_access_enable(b, a));
  }
  mt_close(a);
  mt_close(b);
}

/* METRALE_TEST_HOST_NO_PEER: a simulated device without a peer path. Peer
 * access is refused with the reason; peer copies still work. */
static void refusal_says_why_and_copies_still_work(void** state) {
  (void)state;
  if (mt_backend() != METRALE_BACKEND_HOST) skip();
  metrale_context_t* a = open_on(0, 0);
  setenv("METRALE_TEST_HOST_NO_PEER", "1", 1);
  metrale_context_t* b = open_on(1, 0);
  unsetenv("METRALE_TEST_HOST_NO_PEER");
  metrale_context_t* c = open_on(0, 0); /* same device as a: always a peer */
  int can = -1;
  MT_OK(metrale_peer_access_query(a, b, &can));
  assert_int_equal(can, 0);
  MT_OK(metrale_peer_access_query(b, a, &can));
  assert_int_equal(can, 0);
  MT_STATUS(metrale_peer_access_enable(a, b), METRALE_ERROR_UNSUPPORTED);
  MT_MESSAGE_HAS("no peer path between simulated devices 0 and 1");
  MT_OK(metrale_peer_access_query(a, c, &can));
  assert_int_equal(can, 1);
  MT_OK(metrale_peer_access_enable(a, c));
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 512, &src));
  MT_OK(metrale_alloc(b, 512, &dst));
  fill_pattern(a, src, 512, 9);
  MT_OK(metrale_copy_peer(a, src, b, dst, 512));
  expect_pattern(b, dst, 512, 9);
  MT_OK(metrale_free(a, src));
  MT_OK(metrale_free(b, dst));
  /* A malformed hook value is refused at create. */
  setenv("METRALE_TEST_HOST_NO_PEER", "yes", 1);
  metrale_context_options_t o = mt_options();
  metrale_context_t* bad = NULL;
  MT_STATUS(metrale_context_create(&o, &bad), METRALE_ERROR_INVALID_ARGUMENT);
  unsetenv("METRALE_TEST_HOST_NO_PEER");
  mt_close(a);
  mt_close(b);
  mt_close(c);
}

/* A context that is lost refuses peer copies both ways, naming its fault;
 * the healthy one goes on working. */
static metrale_status_t lose_context(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_ERROR_CONTEXT_LOST;
}

static void a_lost_context_is_refused_both_ways(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  mt_require_host(a);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_devptr_t src = 0, dst = 0;
  MT_OK(metrale_alloc(a, 256, &src));
  MT_OK(metrale_alloc(b, 256, &dst));
  MT_OK(metrale_module_register_host(b, "faults", "lose", lose_context, NULL));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(b, "faults", "lose", &k));
  const metrale_dim3_t one = {1, 1, 1};
  MT_STATUS(metrale_launch(b, k, one, one, 0, NULL, NULL), METRALE_ERROR_CONTEXT_LOST);
  MT_OK(metrale_counters_reset(a));
  MT_STATUS(metrale_copy_peer(a, src, b, dst, 256), METRALE_ERROR_CONTEXT_LOST);
  MT_STATUS(metrale_copy_peer_async(a, src, b, dst, 256, NULL), METRALE_ERROR_CONTEXT_LOST);
  MT_STATUS(metrale_copy_peer(b, dst, a, src, 256), METRALE_ERROR_CONTEXT_LOST);
  int can = 3;
  MT_STATUS(metrale_peer_access_query(a, b, &can), METRALE_ERROR_CONTEXT_LOST);
  MT_STATUS(metrale_peer_access_enable(a, b), METRALE_ERROR_CONTEXT_LOST);
  assert_int_equal(mt_counters(a).d2d_copies, 0);
  MT_OK(metrale_context_fault(a));
  MT_OK(metrale_memset(a, src, 1, 256));
  MT_OK(metrale_free(a, src));
  mt_close(a);
  mt_close(b); /* destroy succeeds on a lost context */
}

/* From a host kernel running on the source's default stream, the
 * synchronous copy would wait for the kernel itself (rule 5). */
struct reentry {
  metrale_context_t* src_ctx;
  metrale_context_t* dst_ctx;
  metrale_devptr_t src, dst;
  metrale_status_t sync_status, async_status;
};

static metrale_status_t copy_from_inside(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  struct reentry* r = user;
  r->sync_status = metrale_copy_peer(r->src_ctx, r->src, r->dst_ctx, r->dst, 64);
  r->async_status = metrale_copy_peer_async(r->src_ctx, r->src, r->dst_ctx, r->dst, 64, NULL);
  return METRALE_OK;
}

static void from_a_host_kernel(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  mt_require_host(a);
  metrale_context_t* b = open_on(other_device(), 0);
  struct reentry r = {a, b, 0, 0, METRALE_OK, METRALE_OK};
  MT_OK(metrale_alloc(a, 64, &r.src));
  MT_OK(metrale_alloc(b, 64, &r.dst));
  MT_OK(metrale_memset(a, r.src, 0x33, 64));
  MT_OK(metrale_memset(b, r.dst, 0, 64));
  MT_OK(metrale_module_register_host(a, "reentry", "copy", copy_from_inside, &r));
  metrale_kernel_t* k = NULL;
  MT_OK(metrale_kernel_get(a, "reentry", "copy", &k));
  const metrale_dim3_t one = {1, 1, 1};
  MT_OK(metrale_launch(a, k, one, one, 0, NULL, NULL));
  MT_OK(metrale_stream_synchronize(a, NULL));
  assert_int_equal(r.sync_status, METRALE_ERROR_INVALID_ARGUMENT);
  assert_int_equal(r.async_status, METRALE_OK); /* runs nested, at once */
  expect_bytes(b, r.dst, 64, 0x33);
  MT_OK(metrale_free(a, r.src));
  MT_OK(metrale_free(b, r.dst));
  mt_close(a);
  mt_close(b);
}

/* Copies both ways at once from two threads, while a third allocates and
 * frees in both contexts: no deadlock, every copy lands. */
struct pingpong {
  metrale_context_t *from, *to;
  metrale_devptr_t src, dst;
  int rounds;
};

static void* copy_loop(void* arg) {
  struct pingpong* p = arg;
  metrale_stream_t* s = NULL;
  if (metrale_stream_create(p->from, &s) != METRALE_OK) return (void*)1;
  for (int i = 0; i < p->rounds; ++i) {
    if (metrale_copy_peer_async(p->from, p->src, p->to, p->dst, 65536, s) != METRALE_OK)
      return (void*)2;
    if (i % 16 == 0 && metrale_copy_peer(p->from, p->src, p->to, p->dst, 4096) != METRALE_OK)
      return (void*)3;
  }
  if (metrale_stream_synchronize(p->from, s) != METRALE_OK) return (void*)4;
  if (metrale_stream_destroy(p->from, s) != METRALE_OK) return (void*)5;
  return NULL;
}

static void both_ways_from_threads(void** state) {
  (void)state;
  metrale_context_t* a = open_on(0, 0);
  metrale_context_t* b = open_on(other_device(), 0);
  metrale_devptr_t a1 = 0, a2 = 0, b1 = 0, b2 = 0;
  MT_OK(metrale_alloc(a, 65536, &a1));
  MT_OK(metrale_alloc(a, 65536, &a2));
  MT_OK(metrale_alloc(b, 65536, &b1));
  MT_OK(metrale_alloc(b, 65536, &b2));
  MT_OK(metrale_memset(a, a1, 0x11, 65536));
  MT_OK(metrale_memset(b, b1, 0x22, 65536));
  struct pingpong ab = {a, b, a1, b2, 300}, ba = {b, a, b1, a2, 300};
  pthread_t t1, t2;
  assert_int_equal(pthread_create(&t1, NULL, copy_loop, &ab), 0);
  assert_int_equal(pthread_create(&t2, NULL, copy_loop, &ba), 0);
  for (int i = 0; i < 200; ++i) {
    metrale_devptr_t x = 0, y = 0;
    MT_OK(metrale_alloc(a, 1024, &x));
    MT_OK(metrale_alloc(b, 1024, &y));
    MT_OK(metrale_free(a, x));
    MT_OK(metrale_free(b, y));
  }
  void* r1 = (void*)9;
  void* r2 = (void*)9;
  assert_int_equal(pthread_join(t1, &r1), 0);
  assert_int_equal(pthread_join(t2, &r2), 0);
  assert_null(r1);
  assert_null(r2);
  expect_bytes(b, b2, 65536, 0x11);
  expect_bytes(a, a2, 65536, 0x22);
  assert_int_equal(mt_counters(a).d2d_copies >= 300, 1);
  MT_OK(metrale_free(a, a1));
  MT_OK(metrale_free(a, a2));
  MT_OK(metrale_free(b, b1));
  MT_OK(metrale_free(b, b2));
  mt_close(a);
  mt_close(b);
}

int main(void) {
  setenv("METRALE_HOST_DEVICES", "4", 0); /* the caller's value wins */
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(copy_between_two_devices),
      cmocka_unit_test(counted_and_traced_in_the_source_context),
      cmocka_unit_test(one_context_is_a_plain_copy),
      cmocka_unit_test(ranges_checked_against_both_ledgers),
      cmocka_unit_test(host_refuses_foreign_ranges),
      cmocka_unit_test(dead_handles_are_refused),
      cmocka_unit_test(refused_while_capturing),
      cmocka_unit_test(peer_access_between_two_devices),
      cmocka_unit_test(refusal_says_why_and_copies_still_work),
      cmocka_unit_test(a_lost_context_is_refused_both_ways),
      cmocka_unit_test(from_a_host_kernel),
      cmocka_unit_test(both_ways_from_threads),
  };
  return MT_RUN(tests);
}
