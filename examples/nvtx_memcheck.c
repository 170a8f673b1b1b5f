/*
 * nvtx_memcheck.c — an out-of-bounds write inside a pooled block, for
 * compute-sanitizer's memcheck (scripts/nvtx-memcheck.sh runs it with the
 * NVTX memory annotations on and off and compares).
 *
 * Two allocations of 1000 bytes (250 floats) come from the caching pool as
 * adjacent 1024-byte blocks of one chunk. A kernel writes elements 0..250
 * of the first: 250 is one past the end, in the block's rounding slack. The
 * driver only knows the chunk, so without annotations memcheck sees a write
 * inside a live allocation and stays silent; with them the block is a
 * 1000-byte region of an NVTX heap and memcheck reports one invalid global
 * write. Needs the cuda backend; exits 77 (skip) on the host backend.
 *
 * Prints, for the script: the blocks and whether they are adjacent, whether
 * a tool was visible (NVTX_INJECTION64_PATH), the launch's status. Exits 0
 * once the kernel ran (memcheck may make it fail: that is the point), 1 on
 * any other failure.
 */
#include <metrale_gpu.h>

#include <stdio.h>
#include <stdlib.h>

#define N 250u /* floats asked for per block: 1000 bytes, a 1024-byte block */

/* write_upto(p, n): p[i] = i for i in 0..n, one element past the end. */
static const char write_upto_ptx[] =
    ".version 7.0\n.target sm_75\n.address_size 64\n"
    ".visible .entry write_upto(.param .u64 pp, .param .u64 pn)\n"
    "{\n"
    "  .reg .pred %p<2>; .reg .b32 %r<5>; .reg .b64 %rd<8>;\n"
    "  ld.param.u64 %rd1, [pp]; ld.param.u64 %rd2, [pn];\n"
    "  mov.u32 %r1, %ctaid.x; mov.u32 %r2, %ntid.x; mul.wide.u32 %rd3, %r1, %r2;\n"
    "  mov.u32 %r3, %tid.x; cvt.u64.u32 %rd4, %r3; add.s64 %rd5, %rd3, %rd4;\n"
    "  setp.gt.u64 %p1, %rd5, %rd2; @%p1 bra DONE;\n"
    "  cvta.to.global.u64 %rd6, %rd1; shl.b64 %rd7, %rd5, 2; add.s64 %rd6, %rd6, %rd7;\n"
    "  cvt.u32.u64 %r4, %rd5; st.global.u32 [%rd6], %r4;\n"
    "DONE:\n  ret;\n}\n";

static int check(metrale_status_t s, const char* what) {
  if (s == METRALE_OK) return 0;
  fprintf(stderr, "nvtx_memcheck: %s: %s: %s\n", what, metrale_status_name(s),
          metrale_last_error_message());
  return 1;
}
#define CHECK(expr) \
  do {              \
    if (check((expr), #expr)) goto fail; \
  } while (0)

int main(void) {
  metrale_context_t* ctx = NULL;
  metrale_devptr_t a = 0, b = 0;
  metrale_kernel_t* k = NULL;
  const char* tool = getenv("NVTX_INJECTION64_PATH");
  const char* nvtx = getenv("METRALE_NVTX");
  printf("nvtx_memcheck: METRALE_NVTX=%s, NVTX_INJECTION64_PATH=%s\n",
         nvtx != NULL ? nvtx : "(unset)", tool != NULL && *tool ? tool : "(unset: no tool)");

  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = METRALE_BACKEND_CUDA;
  opts.pool = 1;          /* the blocks must come from one chunk */
  opts.redzone_bytes = 0; /* the slack is what memcheck must see */
  metrale_status_t s = metrale_context_create(&opts, &ctx);
  if (s == METRALE_ERROR_NO_DRIVER || s == METRALE_ERROR_NO_DEVICE) {
    printf("nvtx_memcheck: skipped, no cuda device: %s\n", metrale_last_error_message());
    return 77;
  }
  CHECK(s);

  CHECK(metrale_alloc(ctx, N * sizeof(float), &a));
  CHECK(metrale_alloc(ctx, N * sizeof(float), &b));
  printf("nvtx_memcheck: block a = 0x%llx, block b = 0x%llx, b - a = %lld: %s\n",
         (unsigned long long)a, (unsigned long long)b, (long long)(b - a),
         b == a + 1024 ? "adjacent blocks of one pool chunk (pooled: yes)"
                       : "not adjacent (pooled: no; the pool is off or not metrale_alloc's path)");

  CHECK(metrale_module_load_data(ctx, "nvtx_demo", write_upto_ptx, sizeof write_upto_ptx));
  CHECK(metrale_kernel_get(ctx, "nvtx_demo", "write_upto", &k));
  uint64_t n = N; /* writes p[0..N]: p[N] is at a + 1000, inside a's slack */
  void* params[] = {&a, &n};
  metrale_dim3_t grid = {1, 1, 1}, block = {256, 1, 1};
  CHECK(metrale_launch(ctx, k, grid, block, 0, NULL, params));
  s = metrale_stream_synchronize(ctx, NULL);
  printf("nvtx_memcheck: write_upto(a, %u) wrote one float past the end of a: %s%s%s\n", N,
         metrale_status_name(s), s == METRALE_OK ? "" : ": ",
         s == METRALE_OK ? "" : metrale_last_error_message());

  /* Under memcheck a reported write may leave the context lost: frees then
   * answer CONTEXT_LOST, which is expected here. */
  metrale_free(ctx, b);
  metrale_free(ctx, a);
  CHECK(metrale_context_destroy(ctx));
  printf("nvtx_memcheck: done\n");
  return 0;

fail:
  if (ctx != NULL) metrale_context_destroy(ctx);
  return 1;
}
