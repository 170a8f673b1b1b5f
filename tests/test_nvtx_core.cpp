// The NVTX annotation hooks as core calls them (no GPU, no tool): the pool's
// BackendChunkSource over a backend that logs every mem_alloc, mem_free and
// annotation call, so the order and the ranges can be checked. Plain
// checks: every failure prints its line; exit status 1 when any failed.
// Usage: test_nvtx_core [CASE]
#include <cstdio>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "annotation_backend.hpp"
#include "backend/error.hpp"
#include "core/pool/backend_chunk_source.hpp"
#include "core/pool/caching_pool.hpp"
#include "core/pool/size_class.hpp"

using metrale::core::pool::BackendChunkSource;
using metrale::core::pool::CachingPool;
using metrale::core::pool::DevPtr;
using nvtxtest::AnnotationBackend;

namespace {

int g_failures = 0;

#define CHECK(cond)                                                   \
  do {                                                                \
    if (!(cond)) {                                                    \
      std::printf("  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond); \
      ++g_failures;                                                   \
    }                                                                 \
  } while (0)

std::string hex(DevPtr p) {
  char b[32];
  std::snprintf(b, sizeof b, "%#llx", (unsigned long long)p);
  return b;
}

// The log equals `want`, printed side by side when not.
void check_log(AnnotationBackend& be, const std::vector<std::string>& want, int line) {
  const std::vector<std::string> got = be.log();
  if (got == want) return;
  std::printf("  FAILED line %d: backend log differs\n    got:", line);
  for (const auto& s : got) std::printf(" [%s]", s.c_str());
  std::printf("\n    want:");
  for (const auto& s : want) std::printf(" [%s]", s.c_str());
  std::printf("\n");
  ++g_failures;
}
#define CHECK_LOG(be, ...) check_log((be), std::vector<std::string>{__VA_ARGS__}, __LINE__)

// The pool's allocate answers a DevPtr or a Block* (the ledger's handle):
// both give the address.
DevPtr ptr_of(DevPtr p) { return p; }
template <class B>
DevPtr ptr_of(const B* b) {
  return b->ptr;
}

constexpr size_t MiB = 1024 * 1024;
constexpr uint64_t S1 = 0x100;

// A chunk is a heap right after mem_alloc and stops being one right before
// mem_free (once freed, the driver may give the range to someone else).
void chunk_hooks_wrap_alloc_and_free() {
  AnnotationBackend be;
  BackendChunkSource src(be, true);
  CHECK(src.annotating());
  const DevPtr p = src.chunk_alloc(2 * MiB);
  CHECK(p != 0);
  CHECK_LOG(be, "alloc " + hex(p) + " 2097152", "chunk " + hex(p) + " 2097152");
  be.clear();
  src.chunk_free(p, 2 * MiB);
  CHECK_LOG(be, "chunk_release " + hex(p), "free " + hex(p));
}

// The block hooks pass the caller's range through, unchanged.
void block_hooks_forward_the_range() {
  AnnotationBackend be;
  BackendChunkSource src(be, true);
  const DevPtr p = src.chunk_alloc(2 * MiB);
  be.clear();
  src.block_handed_out(p + 1024, 1000);
  src.block_returned(p + 1024);
  CHECK_LOG(be, "block " + hex(p + 1024) + " 1000", "block_release " + hex(p + 1024));
}

// Annotations off (METRALE_NVTX=0, or no tool): no hook is ever called.
void off_calls_no_hook() {
  AnnotationBackend be;
  BackendChunkSource src(be, false);
  CHECK(!src.annotating());
  const DevPtr p = src.chunk_alloc(2 * MiB);
  src.block_handed_out(p, 1000);
  src.block_returned(p);
  src.chunk_free(p, 2 * MiB);
  CHECK_LOG(be, "alloc " + hex(p) + " 2097152", "free " + hex(p));
  be.clear();
  BackendChunkSource plain(be);  // the default is off too
  const DevPtr q = plain.chunk_alloc(2 * MiB);
  CHECK_LOG(be, "alloc " + hex(q) + " 2097152");
}

// Out of memory: no chunk, so nothing to annotate.
void out_of_memory_annotates_nothing() {
  AnnotationBackend be;
  BackendChunkSource src(be, true);
  be.out_of_memory = true;
  CHECK(src.chunk_alloc(2 * MiB) == 0);
  CHECK_LOG(be);
}

// Through the pool: two small blocks share one annotated chunk; trim and the
// pool's destructor release each chunk's heap before freeing it.
void pool_annotates_each_chunk_once() {
  AnnotationBackend be;
  BackendChunkSource src(be, true);
  DevPtr c1 = 0;
  {
    CachingPool pool(src);
    auto a = pool.allocate(1000, S1);
    auto b = pool.allocate(1000, S1);
    c1 = ptr_of(a);
    const size_t chunk = metrale::core::pool::chunk_size_for(1024);
    CHECK(ptr_of(b) == c1 + 1024);  // adjacent in one chunk
    CHECK_LOG(be, "alloc " + hex(c1) + " " + std::to_string(chunk),
              "chunk " + hex(c1) + " " + std::to_string(chunk));
    pool.free(a);
    pool.free(b);
    be.clear();
    CHECK(pool.trim(0) == chunk);
    CHECK_LOG(be, "chunk_release " + hex(c1), "free " + hex(c1));
    be.clear();
    auto c = pool.allocate(3 * MiB, S1);  // a large chunk, held at destruction
    (void)c;
  }
  const std::vector<std::string> log = be.log();
  CHECK(log.size() == 4);
  if (log.size() == 4) {
    const std::string base = log[0].substr(6, log[0].find(' ', 6) - 6);
    CHECK(log[1].rfind("chunk " + base + " ", 0) == 0);
    CHECK(log[2] == "chunk_release " + base);
    CHECK(log[3] == "free " + base);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<const char*, std::function<void()>>> cases = {
      {"chunk_hooks_wrap_alloc_and_free", chunk_hooks_wrap_alloc_and_free},
      {"block_hooks_forward_the_range", block_hooks_forward_the_range},
      {"off_calls_no_hook", off_calls_no_hook},
      {"out_of_memory_annotates_nothing", out_of_memory_annotates_nothing},
      {"pool_annotates_each_chunk_once", pool_annotates_each_chunk_once},
  };
  int failed_cases = 0, ran = 0;
  for (const auto& c : cases) {
    if (argc > 1 && std::strcmp(argv[1], c.first) != 0) continue;
    ++ran;
    const int before = g_failures;
    std::printf("[ RUN  ] %s\n", c.first);
    try {
      c.second();
    } catch (const std::exception& e) {
      std::printf("  FAILED: exception: %s\n", e.what());
      ++g_failures;
    }
    const bool ok = g_failures == before;
    failed_cases += !ok;
    std::printf("[ %s ] %s\n", ok ? " OK " : "FAIL", c.first);
  }
  if (ran == 0) {
    std::printf("no case named %s\n", argc > 1 ? argv[1] : "");
    return 1;
  }
  std::printf("%d of %d cases failed\n", failed_cases, ran);
  return failed_cases == 0 ? 0 : 1;
}
