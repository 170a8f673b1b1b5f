/*
 * nccl_allreduce.c — NCCL's all-reduce over memory allocated by
 * libmetrale_gpu, one thread and one context per GPU.
 *
 * Rank r fills its send buffer with r + 1; after the sum every element of
 * every rank's receive buffer must be 1 + 2 + ... + n. The buffers are
 * ordinary metrale_alloc allocations (on each device's ledger, with their
 * sites), NCCL runs on the library's default stream of each context
 * (metrale_stream_native), and the process-wide ledger report at the end
 * names every device, site and byte. The same code runs one process per GPU
 * across hosts: only where the unique id comes from changes (see
 * docs/scaling.md).
 *
 *   nccl_allreduce [--ranks N] [--mib M]     (default: every GPU, 32 MiB)
 *
 * NCCL is opened at run time (nccl_loader.h: $METRALE_NCCL_LIB,
 * libnccl.so.2, or python3's nvidia/nccl/lib). NCCL_NVLS_ENABLE=0 is set
 * before NCCL loads: NVLink multicast stays off. Exit status: 0 when every
 * sum is right, 1 when not, 77 (skipped) when there is no CUDA device or
 * no NCCL, with a line saying why. One rank on one GPU works too.
 */
#define _GNU_SOURCE /* setenv, popen */
#include <metrale_gpu.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "nccl_loader.h"

#define SKIPPED 77

static nccl_api_t nccl;
static ncclUniqueId nccl_id;

typedef struct rank {
  int rank, nranks;
  size_t count; /* floats per buffer */
  metrale_context_t* ctx;
  metrale_devptr_t send, recv;
  int ok, skipped;
  char why[512];
} rank_t;

#define FAIL_IF(cond, ...)                                   \
  do {                                                       \
    if (cond) {                                              \
      snprintf(r->why, sizeof r->why, __VA_ARGS__);          \
      return NULL;                                           \
    }                                                        \
  } while (0)

/* Every rank sets up first; ncclCommInitRank waits for all ranks, so no
 * rank calls it unless every rank's setup worked (else the others would
 * wait for ever). */
static pthread_barrier_t setup_done;
static int setup_failures; /* under setup_lock */
static pthread_mutex_t setup_lock = PTHREAD_MUTEX_INITIALIZER;

/* The context, the buffers (send = rank + 1, recv = 0) and the device bound
 * to this thread; r on success, NULL with r->why set. */
static void* setup_rank(rank_t* r, float* host, void** stream) {
  metrale_context_options_t o;
  metrale_context_options_init(&o);
  o.backend = METRALE_BACKEND_CUDA;
  o.device = r->rank;
  metrale_status_t s = metrale_context_create(&o, &r->ctx);
  FAIL_IF(s != METRALE_OK, "context on device %d: %s", r->rank, metrale_last_error_message());
  if (metrale_context_backend(r->ctx) != METRALE_BACKEND_CUDA) {
    r->skipped = 1; /* METRALE_BACKEND=host overrides the options: every rank is host */
    FAIL_IF(1, "the context runs on the host backend (METRALE_BACKEND=%s): NCCL needs GPUs",
            getenv("METRALE_BACKEND") != NULL ? getenv("METRALE_BACKEND") : "?");
  }
  const size_t bytes = r->count * sizeof(float);
  s = metrale_alloc(r->ctx, bytes, &r->send);
  FAIL_IF(s != METRALE_OK, "metrale_alloc send: %s", metrale_last_error_message());
  s = metrale_alloc(r->ctx, bytes, &r->recv);
  FAIL_IF(s != METRALE_OK, "metrale_alloc recv: %s", metrale_last_error_message());
  for (size_t i = 0; i < r->count; ++i) host[i] = (float)(r->rank + 1);
  s = metrale_copy_h2d(r->ctx, host, bytes, r->send);
  if (s == METRALE_OK) s = metrale_memset(r->ctx, r->recv, 0, bytes);
  FAIL_IF(s != METRALE_OK, "filling the buffers: %s", metrale_last_error_message());
  /* NCCL works on the calling thread's current device: the context's. */
  s = metrale_context_bind_thread(r->ctx);
  if (s == METRALE_OK) s = metrale_stream_native(r->ctx, NULL, stream);
  FAIL_IF(s != METRALE_OK, "binding device %d: %s", r->rank, metrale_last_error_message());
  return r;
}

static void* run_rank(void* arg) {
  rank_t* r = arg;
  const size_t bytes = r->count * sizeof(float);
  float* host = malloc(bytes);
  void* stream = NULL;
  const int ready = host != NULL && setup_rank(r, host, &stream) != NULL;
  if (host == NULL) snprintf(r->why, sizeof r->why, "out of host memory");
  pthread_mutex_lock(&setup_lock);
  setup_failures += !ready;
  pthread_mutex_unlock(&setup_lock);
  pthread_barrier_wait(&setup_done);
  pthread_mutex_lock(&setup_lock);
  const int give_up = setup_failures > 0;
  pthread_mutex_unlock(&setup_lock);
  if (give_up) {
    if (ready) snprintf(r->why, sizeof r->why, "another rank's setup failed: no NCCL");
    free(host);
    return NULL;
  }
  ncclComm_t comm = NULL;
  ncclResult_t nr = nccl.CommInitRank(&comm, r->nranks, nccl_id, r->rank);
  if (nr != 0) free(host);
  FAIL_IF(nr != 0, "ncclCommInitRank: %s", nccl_error(&nccl, nr));
  nr = nccl.AllReduce((const void*)(uintptr_t)r->send, (void*)(uintptr_t)r->recv, r->count,
                      METRALE_NCCL_FLOAT32, METRALE_NCCL_SUM, comm, stream);
  /* The library's synchronize waits for NCCL's work on that stream too. */
  metrale_status_t s = nr == 0 ? metrale_stream_synchronize(r->ctx, NULL) : METRALE_OK;
  nccl.CommDestroy(comm);
  if (nr != 0 || s != METRALE_OK) free(host);
  FAIL_IF(nr != 0, "ncclAllReduce: %s", nccl_error(&nccl, nr));
  FAIL_IF(s != METRALE_OK, "waiting for the all-reduce: %s", metrale_last_error_message());

  s = metrale_copy_d2h(r->ctx, r->recv, host, bytes);
  if (s != METRALE_OK) free(host);
  FAIL_IF(s != METRALE_OK, "reading the sums: %s", metrale_last_error_message());
  const float want = (float)r->nranks * (float)(r->nranks + 1) / 2.0f;
  for (size_t i = 0; i < r->count; ++i) {
    if (host[i] != want) {
      snprintf(r->why, sizeof r->why, "rank %d element %zu is %g, expected %g", r->rank, i,
               (double)host[i], (double)want);
      free(host);
      return NULL;
    }
  }
  free(host);
  r->ok = 1;
  return NULL;
}

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 1); /* first thing: no NVLink multicast, ever */
  int nranks = 0;
  size_t mib = 32;
  for (int i = 1; i + 1 < argc; i += 2) {
    if (strcmp(argv[i], "--ranks") == 0) nranks = atoi(argv[i + 1]);
    else if (strcmp(argv[i], "--mib") == 0) mib = (size_t)strtoull(argv[i + 1], NULL, 10);
  }
  int devices = 0;
  metrale_status_t s = metrale_device_count(METRALE_BACKEND_CUDA, &devices);
  if (s != METRALE_OK || devices < 1) {
    printf("nccl_allreduce: skipped: no CUDA device (%s: %s)\n", metrale_status_name(s),
           metrale_last_error_message());
    return SKIPPED;
  }
  if (nranks <= 0) nranks = devices;
  if (nranks > devices) {
    printf("nccl_allreduce: skipped: %d ranks asked, %d CUDA device(s) here\n", nranks, devices);
    return SKIPPED;
  }
  char why[8192];
  if (nccl_load(&nccl, why, sizeof why) != 0) {
    printf("nccl_allreduce: skipped: NCCL not found: %s\n", why);
    return SKIPPED;
  }
  int version = 0;
  nccl.GetVersion(&version);
  printf("nccl_allreduce: NCCL %d from %s, NCCL_NVLS_ENABLE=%s, %d rank(s), %zu MiB per buffer\n",
         version, nccl.path, getenv("NCCL_NVLS_ENABLE"), nranks, mib);
  ncclResult_t nr = nccl.GetUniqueId(&nccl_id);
  if (nr != 0) {
    printf("nccl_allreduce: ncclGetUniqueId: %s\n", nccl_error(&nccl, nr));
    return 1;
  }
  pthread_barrier_init(&setup_done, NULL, (unsigned)nranks);
  rank_t* ranks = calloc((size_t)nranks, sizeof *ranks);
  pthread_t* threads = calloc((size_t)nranks, sizeof *threads);
  if (ranks == NULL || threads == NULL) return 1;
  for (int i = 0; i < nranks; ++i) {
    ranks[i] = (rank_t){.rank = i, .nranks = nranks, .count = mib * 1024 * 1024 / sizeof(float)};
    pthread_create(&threads[i], NULL, run_rank, &ranks[i]);
  }
  int failed = 0, skipped = 0;
  for (int i = 0; i < nranks; ++i) pthread_join(threads[i], NULL);
  for (int i = 0; i < nranks; ++i) {
    if (ranks[i].skipped) {
      printf("nccl_allreduce: skipped: rank %d: %s\n", i, ranks[i].why);
      skipped = 1;
    } else if (!ranks[i].ok) {
      printf("nccl_allreduce: rank %d FAILED: %s\n", i, ranks[i].why);
      failed = 1;
    }
  }
  /* One ledger report for the process: every device, site and byte. */
  size_t needed = 0;
  if (metrale_alloc_report_all(0, 0, NULL, 0, &needed) == METRALE_OK) {
    char* text = malloc(needed);
    if (text != NULL && metrale_alloc_report_all(0, 0, text, needed, &needed) == METRALE_OK)
      printf("%s", text);
    free(text);
  }
  for (int i = 0; i < nranks; ++i) {
    if (ranks[i].ctx == NULL) continue;
    if (ranks[i].send != 0) metrale_free(ranks[i].ctx, ranks[i].send);
    if (ranks[i].recv != 0) metrale_free(ranks[i].ctx, ranks[i].recv);
    metrale_context_destroy(ranks[i].ctx);
  }
  if (!failed && !skipped) {
    printf("nccl_allreduce: OK: %d rank(s), every element = %g\n", nranks,
           (double)nranks * (nranks + 1) / 2.0);
  }
  free(ranks);
  free(threads);
  return failed ? 1 : skipped ? SKIPPED : 0;
}
