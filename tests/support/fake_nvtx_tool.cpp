// A stand-in for compute-sanitizer's NVTX side, loaded by NVTX3 through
// NVTX_INJECTION64_PATH as a real tool is. It takes the memory extension
// (heap and region calls) and records each call as a line the test reads
// back through fake_nvtx_log(); it also checks what a sanitizer relies on:
// a region lies inside the heap whose handle it names, an unregistered
// region or heap was registered before. Violations are logged as "BAD ...".
// FAKE_NVTX_NO_MEM=1: it declines the memory extension (like a profiler
// that only takes ranges).
#define NVTX_NO_IMPL
#include <nvtx3/nvToolsExtMem.h>

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <string>
#include <vector>

namespace {

std::mutex g_mu;
std::vector<std::string> g_log;
struct Range {
  uintptr_t ptr;
  size_t size;
};
std::map<uintptr_t, Range> g_heaps;    // handle -> range
std::map<uintptr_t, uintptr_t> g_regions;  // region ptr -> heap handle
uintptr_t g_next_handle = 0x1000;

void add(const char* fmt, ...) __attribute__((format(printf, 1, 2)));
void add(const char* fmt, ...) {
  char line[160];
  va_list ap;
  va_start(ap, fmt);
  std::vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  g_log.emplace_back(line);
}

nvtxMemHeapHandle_t NVTX_API heap_register(nvtxDomainHandle_t, nvtxMemHeapDesc_t const* d) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (d->extCompatID != NVTX_EXT_COMPATID_MEM || d->structSize != sizeof(*d) ||
      d->type != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
      d->typeSpecificDescSize != sizeof(nvtxMemVirtualRangeDesc_t)) {
    add("BAD heap descriptor");
    return nullptr;
  }
  auto* r = static_cast<const nvtxMemVirtualRangeDesc_t*>(d->typeSpecificDesc);
  const uintptr_t h = g_next_handle;
  g_next_handle += 0x10;
  g_heaps[h] = Range{reinterpret_cast<uintptr_t>(r->ptr), r->size};
  add("heap usage=%u ptr=%#lx size=%zu -> %#lx", d->usage,
      (unsigned long)reinterpret_cast<uintptr_t>(r->ptr), r->size, (unsigned long)h);
  return reinterpret_cast<nvtxMemHeapHandle_t>(h);
}

void NVTX_API heap_unregister(nvtxDomainHandle_t, nvtxMemHeapHandle_t heap) {
  std::lock_guard<std::mutex> lock(g_mu);
  const uintptr_t h = reinterpret_cast<uintptr_t>(heap);
  auto it = g_heaps.find(h);
  if (it == g_heaps.end()) {
    add("BAD unheap of unknown %#lx", (unsigned long)h);
    return;
  }
  for (auto r = g_regions.begin(); r != g_regions.end();) {
    r = r->second == h ? g_regions.erase(r) : std::next(r);  // the heap takes its regions
  }
  g_heaps.erase(it);
  add("unheap %#lx", (unsigned long)h);
}

void NVTX_API regions_register(nvtxDomainHandle_t, nvtxMemRegionsRegisterBatch_t const* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (b->extCompatID != NVTX_EXT_COMPATID_MEM || b->structSize != sizeof(*b) ||
      b->regionType != NVTX_MEM_TYPE_VIRTUAL_ADDRESS ||
      b->regionDescElementSize != sizeof(nvtxMemVirtualRangeDesc_t)) {
    add("BAD region batch");
    return;
  }
  const uintptr_t h = reinterpret_cast<uintptr_t>(b->heap);
  auto heap = g_heaps.find(h);
  auto* r = static_cast<const nvtxMemVirtualRangeDesc_t*>(b->regionDescElements);
  for (size_t i = 0; i < b->regionCount; ++i) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(r[i].ptr);
    if (heap == g_heaps.end() || p < heap->second.ptr ||
        p + r[i].size > heap->second.ptr + heap->second.size) {
      add("BAD region %#lx+%zu outside heap %#lx", (unsigned long)p, r[i].size, (unsigned long)h);
      continue;
    }
    if (g_regions.count(p) != 0) add("BAD region %#lx registered twice", (unsigned long)p);
    g_regions[p] = h;
    add("region heap=%#lx ptr=%#lx size=%zu", (unsigned long)h, (unsigned long)p, r[i].size);
  }
}

void NVTX_API regions_unregister(nvtxDomainHandle_t, nvtxMemRegionsUnregisterBatch_t const* b) {
  std::lock_guard<std::mutex> lock(g_mu);
  if (b->extCompatID != NVTX_EXT_COMPATID_MEM || b->structSize != sizeof(*b) ||
      b->refType != NVTX_MEM_REGION_REF_TYPE_POINTER ||
      b->refElementSize != sizeof(nvtxMemRegionRef_t)) {
    add("BAD unregister batch");
    return;
  }
  for (size_t i = 0; i < b->refCount; ++i) {
    const uintptr_t p = reinterpret_cast<uintptr_t>(b->refElements[i].pointer);
    if (g_regions.erase(p) == 0) add("BAD unregion of unknown %#lx", (unsigned long)p);
    else add("unregion ptr=%#lx", (unsigned long)p);
  }
}

}  // namespace

extern "C" {

// NVTX core: taken, but with no callbacks (domains are then NULL).
__attribute__((visibility("default"))) int InitializeInjectionNvtx2(NvtxGetExportTableFunc_t) {
  return 1;
}

__attribute__((visibility("default"))) int InitializeInjectionNvtxExtension(
    nvtxExtModuleInfo_t* info) {
  if (info->moduleId != NVTX_EXT_MODULEID_MEM) return 1;
  const char* no = std::getenv("FAKE_NVTX_NO_MEM");
  if (no != nullptr && std::strcmp(no, "1") == 0) return 0;
  intptr_t* slots = info->segments[0].functionSlots;
  slots[NVTX3EXT_CBID_nvtxMemHeapRegister] = reinterpret_cast<intptr_t>(&heap_register);
  slots[NVTX3EXT_CBID_nvtxMemHeapUnregister] = reinterpret_cast<intptr_t>(&heap_unregister);
  slots[NVTX3EXT_CBID_nvtxMemRegionsRegister] = reinterpret_cast<intptr_t>(&regions_register);
  slots[NVTX3EXT_CBID_nvtxMemRegionsUnregister] = reinterpret_cast<intptr_t>(&regions_unregister);
  return 1;
}

// The calls so far, and forgets them. For the test, through dlsym.
__attribute__((visibility("default"))) std::vector<std::string>* fake_nvtx_take_log() {
  std::lock_guard<std::mutex> lock(g_mu);
  auto* out = new std::vector<std::string>(std::move(g_log));
  g_log.clear();
  return out;
}

// Heaps and regions still registered.
__attribute__((visibility("default"))) size_t fake_nvtx_live(size_t* regions) {
  std::lock_guard<std::mutex> lock(g_mu);
  *regions = g_regions.size();
  return g_heaps.size();
}

}  // extern "C"
