// The cuda backend's NVTX calls (src/backend/cuda/nvtx_memory.cpp) against
// a fake tool (support/fake_nvtx_tool.cpp) that NVTX3 loads through
// NVTX_INJECTION64_PATH exactly as it loads compute-sanitizer's: no GPU
// needed. NVTX3 initialises once per process, so each case that loads the
// tool differently is its own run. Usage: test_nvtx_tool CASE, with
// FAKE_NVTX_TOOL naming the fake tool's .so.
#include <dlfcn.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "backend/cuda/nvtx_memory.hpp"

using metrale::backend::cuda_impl::NvtxMemory;

#include "core_check.hpp"

namespace {


const char* tool_path() {
  const char* p = std::getenv("FAKE_NVTX_TOOL");
  if (p == nullptr || *p == '\0') {
    std::printf("FAKE_NVTX_TOOL is not set\n");
    std::exit(1);
  }
  return p;
}

// The fake tool's log since the last call (empty when NVTX never loaded it).
std::vector<std::string> take_log() {
  void* h = dlopen(tool_path(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return {};
  auto take = reinterpret_cast<std::vector<std::string>* (*)()>(dlsym(h, "fake_nvtx_take_log"));
  std::vector<std::string>* v = take();
  std::vector<std::string> out = std::move(*v);
  delete v;
  dlclose(h);
  return out;
}

size_t tool_live(size_t* regions) {
  *regions = 0;
  void* h = dlopen(tool_path(), RTLD_NOW | RTLD_NOLOAD);
  if (h == nullptr) return 0;
  auto live = reinterpret_cast<size_t (*)(size_t*)>(dlsym(h, "fake_nvtx_live"));
  const size_t n = live(regions);
  dlclose(h);
  return n;
}

void check_log(const std::vector<std::string>& want, int line) {
  const std::vector<std::string> got = take_log();
  if (got == want) return;
  std::printf("  FAILED line %d: tool log differs\n    got:", line);
  for (const auto& s : got) std::printf(" [%s]", s.c_str());
  std::printf("\n    want:");
  for (const auto& s : want) std::printf(" [%s]", s.c_str());
  std::printf("\n");
  core_check::failures.fetch_add(1);
}
#define CHECK_LOG(...) check_log(std::vector<std::string>{__VA_ARGS__}, __LINE__)

constexpr uint64_t kBase = 0x10000000, kChunk = 2 << 20;

// Without NVTX_INJECTION64_PATH: off, and NVTX is never touched; then with
// the tool: a chunk is a sub-allocator heap, blocks are regions in it by
// the handle the tool gave, unregistered by pointer.
void annotates() {
  unsetenv("NVTX_INJECTION64_PATH");
  {
    NvtxMemory off;
    CHECK(!off.begin(false));
    off.chunk(kBase, kChunk);
    off.block(kBase, 1000);
  }
  setenv("NVTX_INJECTION64_PATH", tool_path(), 1);
  NvtxMemory m;
  CHECK(m.begin(false));
  m.chunk(kBase, kChunk);
  m.block(kBase, 1000);
  m.block(kBase + 1024, 1000);
  m.block(0x90000000, 64);               // in no chunk: ignored
  m.block(kBase + kChunk, 64);           // just past the chunk: ignored
  m.block(kBase + kChunk - 512, 1024);   // runs past its chunk's end: ignored
  m.block(kBase + 4096, 0);              // empty: no region
  m.block_release(kBase + 4096);         // ... and nothing to release
  m.block_release(kBase + 8192);         // never registered: ignored
  m.block_release(kBase);
  m.block_release(kBase);                // twice: once told
  m.chunk_release(kBase);                // takes the region at +1024 with it
  m.block_release(kBase + 1024);         // its chunk is gone: nothing to say
  m.chunk_release(kBase);                // twice: nothing
  m.chunk(kBase, kChunk);                // the same range again, a new heap
  m.block(kBase + 1024, 1000);           // registered anew
  m.block_release(kBase + 1024);
  m.chunk_release(kBase);
  CHECK_LOG("heap usage=1 ptr=0x10000000 size=2097152 -> 0x1000",
            "region heap=0x1000 ptr=0x10000000 size=1000",
            "region heap=0x1000 ptr=0x10000400 size=1000", "unregion ptr=0x10000000",
            "unheap 0x1000", "heap usage=1 ptr=0x10000000 size=2097152 -> 0x1010",
            "region heap=0x1010 ptr=0x10000400 size=1000", "unregion ptr=0x10000400",
            "unheap 0x1010");
  size_t regions = 0;
  CHECK(tool_live(&regions) == 0);
  CHECK(regions == 0);
}

// 8 threads, each with chunks of its own and blocks in them, and a ninth
// registering blocks in the others' chunks' address range as they come and
// go: every call reaches the tool whole, regions always in their heap.
void threads() {
  setenv("NVTX_INJECTION64_PATH", tool_path(), 1);
  NvtxMemory m;
  CHECK(m.begin(false));
  std::atomic<bool> stop{false};
  std::vector<std::thread> ts;
  for (int t = 0; t < 8; ++t) {
    ts.emplace_back([&m, t] {
      const uint64_t base = kBase + uint64_t(t) * kChunk;
      for (int i = 0; i < 300; ++i) {
        m.chunk(base, kChunk);
        for (uint64_t b = 0; b < 4; ++b) m.block(base + b * 1024, 1000);
        for (uint64_t b = 0; b < 2; ++b) m.block_release(base + b * 1024);
        m.chunk_release(base);
      }
    });
  }
  std::thread prober([&m, &stop] {
    while (!stop.load()) {
      m.block(kBase + 8 * kChunk + 4096, 16);  // in no chunk ever: ignored
    }
  });
  for (auto& t : ts) t.join();
  stop.store(true);
  prober.join();
  const std::vector<std::string> log = take_log();
  size_t heaps = 0, unheaps = 0, regions = 0, unregions = 0;
  for (const auto& s : log) {
    if (s.rfind("BAD", 0) == 0) {
      std::printf("  tool says: %s\n", s.c_str());
      core_check::failures.fetch_add(1);
    }
    heaps += s.rfind("heap ", 0) == 0;
    unheaps += s.rfind("unheap ", 0) == 0;
    regions += s.rfind("region ", 0) == 0;
    unregions += s.rfind("unregion ", 0) == 0;
  }
  CHECK(heaps == 8 * 300);
  CHECK(unheaps == 8 * 300);
  CHECK(regions == 8 * 300 * 4);
  CHECK(unregions == 8 * 300 * 2);
  size_t live_regions = 0;
  CHECK(tool_live(&live_regions) == 0);
  CHECK(live_regions == 0);
}

// A tool that declines the memory extension: the first heap registration
// gets no handle and the annotations switch off; nothing reaches the tool.
void tool_without_memory() {
  setenv("NVTX_INJECTION64_PATH", tool_path(), 1);
  setenv("FAKE_NVTX_NO_MEM", "1", 1);
  NvtxMemory m;
  CHECK(m.begin(false));
  m.chunk(kBase, kChunk);
  m.block(kBase, 1000);
  m.block_release(kBase);
  m.chunk_release(kBase);
  CHECK_LOG();
}

// METRALE_NVTX=1 without a tool: begin says yes (NVTX decides), the first
// chunk finds no tool, and every later call is a no-op.
void forced_without_tool() {
  unsetenv("NVTX_INJECTION64_PATH");
  NvtxMemory m;
  CHECK(m.begin(true));
  m.chunk(kBase, kChunk);
  m.block(kBase, 1000);
  m.block_release(kBase);
  m.chunk_release(kBase);
  CHECK_LOG();
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::pair<const char*, std::function<void()>>> cases = {
      {"annotates", annotates},
      {"threads", threads},
      {"tool_without_memory", tool_without_memory},
      {"forced_without_tool", forced_without_tool},
  };
  if (argc != 2) {
    std::printf("usage: test_nvtx_tool CASE (one per process: NVTX initialises once)\n");
    return 1;
  }
  for (const auto& c : cases) {
    if (std::strcmp(argv[1], c.first) != 0) continue;
    std::printf("[ RUN  ] %s\n", c.first);
    c.second();
    const bool ok = core_check::failures.load() == 0;
    std::printf("[ %s ] %s\n", ok ? " OK " : "FAIL", c.first);
    return ok ? 0 : 1;
  }
  std::printf("no case named %s\n", argv[1]);
  return 1;
}
