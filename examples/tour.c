/*
 * tour.c — the first program to run: what libmetrale_gpu tells you.
 *
 * A context on the auto backend (the GPU when one answers, else the host
 * backend), allocations from two call sites, copies, a kernel launch, a graph
 * captured and replayed, a red-zone overflow planted and caught, then the
 * ledger report and the counters.
 *
 * Build it with nothing but pkg-config:
 *   cc tour.c $(pkg-config --cflags --libs metrale_gpu) -o tour
 */
#include <metrale_gpu.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 4096u
#define REDZONE 64u

/* add_f32 for the GPU, as PTX text: loaded by the driver's JIT on any GPU. */
static const char add_f32_ptx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry add_f32(.param .u64 pa, .param .u64 pb, .param .u64 pc, .param .u64 pn)\n"
    "{\n"
    "  .reg .pred %p<2>; .reg .f32 %f<4>; .reg .b32 %r<4>; .reg .b64 %rd<15>;\n"
    "  ld.param.u64 %rd2, [pa]; ld.param.u64 %rd3, [pb];\n"
    "  ld.param.u64 %rd4, [pc]; ld.param.u64 %rd5, [pn];\n"
    "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mul.wide.u32 %rd6, %r1, %r2;\n"
    "  mov.u32 %r3, %tid.x; cvt.u64.u32 %rd7, %r3; add.s64 %rd1, %rd6, %rd7;\n"
    "  setp.ge.u64 %p1, %rd1, %rd5; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd8, %rd2; shl.b64 %rd9, %rd1, 2; add.s64 %rd10, %rd8, %rd9;\n"
    "  cvta.to.global.u64 %rd11, %rd3; add.s64 %rd12, %rd11, %rd9;\n"
    "  ld.global.f32 %f1, [%rd12]; ld.global.f32 %f2, [%rd10]; add.f32 %f3, %f2, %f1;\n"
    "  cvta.to.global.u64 %rd13, %rd4; add.s64 %rd14, %rd13, %rd9; st.global.f32 [%rd14], %f3;\n"
    "DONE:\n  ret;\n}\n";

/* add_f32 for the host backend: the same kernel as a C function. */
static metrale_status_t add_f32_host(const metrale_host_kernel_call_t* call, void* user) {
  (void)user;
  const float* a = *(const float* const*)call->params[0];
  const float* b = *(const float* const*)call->params[1];
  float* c = *(float* const*)call->params[2];
  uint64_t n = *(const uint64_t*)call->params[3];
  for (uint64_t i = 0; i < n; i++) c[i] = a[i] + b[i];
  return METRALE_OK;
}

static int check(metrale_status_t s, const char* what) {
  if (s == METRALE_OK) return 0;
  fprintf(stderr, "tour: %s failed: %s: %s\n", what, metrale_status_name(s),
          metrale_last_error_message());
  return 1;
}
#define CHECK(call) \
  do {              \
    if (check((call), #call)) goto fail; \
  } while (0)

/* A second allocation site, so the ledger has two lines to name. */
static metrale_status_t alloc_output(metrale_context_t* ctx, metrale_devptr_t* out) {
  return metrale_alloc(ctx, N * sizeof(float), out);
}

static metrale_status_t load_kernel(metrale_context_t* ctx, metrale_kernel_t** k) {
  if (metrale_context_backend(ctx) == METRALE_BACKEND_HOST) {
    size_t sizes[4] = {8, 8, 8, 8};
    metrale_status_t s =
        metrale_module_register_host_params(ctx, "tour", "add_f32", add_f32_host, NULL, sizes, 4);
    if (s != METRALE_OK) return s;
  } else {
    metrale_status_t s = metrale_module_load_data(ctx, "tour", add_f32_ptx, sizeof add_f32_ptx);
    if (s != METRALE_OK) return s;
  }
  return metrale_kernel_get(ctx, "tour", "add_f32", k);
}

static metrale_status_t add(metrale_context_t* ctx, metrale_kernel_t* k, metrale_stream_t* s,
                            metrale_devptr_t a, metrale_devptr_t b, metrale_devptr_t c,
                            uint64_t n) {
  void* params[4] = {&a, &b, &c, &n};
  metrale_dim3_t grid = {(uint32_t)((n + 255) / 256), 1, 1}, block = {256, 1, 1};
  return metrale_launch(ctx, k, grid, block, 0, s, params);
}

int main(void) {
  metrale_context_t* ctx = NULL;
  metrale_stream_t* stream = NULL;
  metrale_graph_t* graph = NULL;
  metrale_kernel_t* k = NULL;
  metrale_devptr_t a = 0, b = 0, c = 0;
  static float ha[N], hb[N], hc[N];
  int rc = 1;

  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.redzone_bytes = REDZONE; /* pad every allocation: overflows get caught */
  opts.launch_trace = 1;
  CHECK(metrale_context_create(&opts, &ctx));

  metrale_device_info_t info;
  CHECK(metrale_device_info(ctx, &info));
  printf("1. context on the %s backend: %s, %zu MiB\n",
         metrale_context_backend(ctx) == METRALE_BACKEND_CUDA ? "cuda" : "host", info.name,
         info.total_memory >> 20);

  CHECK(metrale_alloc(ctx, N * sizeof(float), &a));
  CHECK(metrale_alloc(ctx, N * sizeof(float), &b));
  CHECK(alloc_output(ctx, &c));
  printf("2. three allocations of %zu bytes from two call sites\n", N * sizeof(float));

  for (unsigned i = 0; i < N; i++) {
    ha[i] = (float)i;
    hb[i] = 2.0f * (float)i;
  }
  CHECK(metrale_copy_h2d(ctx, ha, sizeof ha, a));
  CHECK(metrale_copy_h2d(ctx, hb, sizeof hb, b));
  printf("3. copied inputs to the device\n");

  CHECK(load_kernel(ctx, &k));
  CHECK(add(ctx, k, NULL, a, b, c, N));
  CHECK(metrale_copy_d2h(ctx, c, hc, sizeof hc));
  for (unsigned i = 0; i < N; i++)
    if (hc[i] != 3.0f * (float)i) {
      fprintf(stderr, "tour: c[%u] = %g, expected %g\n", i, hc[i], 3.0 * i);
      goto fail;
    }
  printf("4. launched add_f32: c = a + b checked on the host\n");

  /* c += b three times, captured once and replayed twice: c = a + 7b = 15i */
  CHECK(metrale_stream_create(ctx, &stream));
  CHECK(metrale_graph_begin_capture(ctx, stream));
  for (int i = 0; i < 3; i++) CHECK(add(ctx, k, stream, c, b, c, N));
  CHECK(metrale_graph_end_capture(ctx, stream, &graph));
  CHECK(metrale_graph_launch(ctx, graph, stream));
  CHECK(metrale_graph_launch(ctx, graph, stream));
  CHECK(metrale_stream_synchronize(ctx, stream));
  CHECK(metrale_copy_d2h(ctx, c, hc, sizeof hc));
  for (unsigned i = 0; i < N; i++)
    if (hc[i] != 15.0f * (float)i) {
      fprintf(stderr, "tour: after replay c[%u] = %g, expected %g\n", i, hc[i], 15.0 * i);
      goto fail;
    }
  printf("5. graph of 3 launches captured, replayed twice, checked\n");

  /* The bug on purpose: n four elements too large writes 16 bytes past c. */
  CHECK(add(ctx, k, NULL, a, b, c, N + 4));
  CHECK(metrale_stream_synchronize(ctx, NULL));
  metrale_redzone_violation_t v[4];
  size_t nv = 0;
  metrale_status_t scan = metrale_redzone_scan(ctx, v, 4, &nv);
  if (scan != METRALE_ERROR_REDZONE_CORRUPTED || nv != 1 || v[0].ptr != c) {
    fprintf(stderr, "tour: the planted overflow was not caught (%s, %zu)\n",
            metrale_status_name(scan), nv);
    goto fail;
  }
  printf("6. red-zone scan caught the overflow: 0x%llx (%zu bytes) from %s:%d, "
         "%zu bytes overwritten from pad offset %zu (expected 0x%02x, found 0x%02x)\n",
         (unsigned long long)v[0].ptr, v[0].bytes, v[0].file, v[0].line, v[0].bad_bytes,
         v[0].first_bad_offset, v[0].expected, v[0].found);

  size_t needed = 0;
  CHECK(metrale_alloc_report(ctx, 0, 0, NULL, 0, &needed));
  char* report = malloc(needed);
  if (!report) goto fail;
  CHECK(metrale_alloc_report(ctx, 0, 0, report, needed, &needed));
  printf("7. ledger report:\n%s", report);
  free(report);

  metrale_counters_t cnt;
  memset(&cnt, 0, sizeof cnt);
  cnt.struct_size = sizeof cnt;
  CHECK(metrale_counters(ctx, &cnt));
  size_t traced = 0;
  CHECK(metrale_launch_trace_read(ctx, NULL, 0, &traced));
  printf("8. counters: %llu launches, %llu graph launches, %llu h2d (%llu bytes), "
         "%llu d2h (%llu bytes), %llu allocs, %llu stream syncs; %zu trace entries\n",
         (unsigned long long)cnt.launches, (unsigned long long)cnt.graph_launches,
         (unsigned long long)cnt.h2d_copies, (unsigned long long)cnt.h2d_bytes,
         (unsigned long long)cnt.d2h_copies, (unsigned long long)cnt.d2h_bytes,
         (unsigned long long)cnt.allocs, (unsigned long long)cnt.stream_syncs, traced);

  CHECK(metrale_free(ctx, a));
  CHECK(metrale_free(ctx, b));
  /* c is left on purpose: destroy sweeps it and its warning names the site. */
  rc = 0;
  printf("9. freed two buffers; destroying the context sweeps the third\n");

fail:
  metrale_graph_destroy(ctx, graph);
  metrale_stream_destroy(ctx, stream);
  metrale_context_destroy(ctx);
  printf(rc == 0 ? "tour: ok\n" : "tour: FAILED\n");
  return rc;
}
