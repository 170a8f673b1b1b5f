// NvtxMemory on the NVTX3 memory extension (nvtx3/nvToolsExtMem.h). The
// calls follow NVIDIA's "NVTX API for Compute Sanitizer" guide: a heap of
// usage NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR over the chunk's virtual
// range, regions of type NVTX_MEM_TYPE_VIRTUAL_ADDRESS in it, unregistered
// by pointer. Memcheck honours them by default since CUDA 12.0 (--nvtx yes).
#include "backend/cuda/nvtx_memory.hpp"

#include <nvtx3/nvToolsExtMem.h>

#include <cstdlib>

namespace metrale::backend::cuda_impl {
namespace {

// One domain for the process (per-backend domains would be equal anyway).
// NULL when the tool implements no domains: NVTX then uses the default one.
nvtxDomainHandle_t domain() {
  static const nvtxDomainHandle_t d = nvtxDomainCreateA("metrale_gpu");
  return d;
}

}  // namespace

bool NvtxMemory::begin(bool force) {
  // How NVTX3 finds a tool on Linux (it also knows a statically linked
  // injection, which this library never has). Checking it ourselves keeps
  // NVTX3's lazy initialisation from running at all without a tool.
  const char* inj = std::getenv("NVTX_INJECTION64_PATH");
  if (!force && (inj == nullptr || *inj == '\0')) return false;
  (void)domain();
  on_.store(true, std::memory_order_relaxed);
  return true;
}

const NvtxMemory::Heap* NvtxMemory::heap_of(uint64_t ptr) const {
  auto it = heaps_.upper_bound(ptr);
  if (it == heaps_.begin()) return nullptr;
  --it;
  if (ptr - it->first >= it->second.bytes) return nullptr;
  return &it->second;
}

void NvtxMemory::chunk(uint64_t ptr, size_t bytes) noexcept {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  nvtxMemVirtualRangeDesc_t range{};
  range.size = bytes;
  range.ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(ptr));
  nvtxMemHeapDesc_t desc{};
  desc.extCompatID = NVTX_EXT_COMPATID_MEM;
  desc.structSize = sizeof(desc);
  desc.usage = NVTX_MEM_HEAP_USAGE_TYPE_SUB_ALLOCATOR;
  desc.type = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  desc.typeSpecificDescSize = sizeof(range);
  desc.typeSpecificDesc = &range;
  nvtxMemHeapHandle_t h = nvtxMemHeapRegister(domain(), &desc);
  // NVTX_MEM_HEAP_HANDLE_NO_TOOL (-1) spelled out: the macro's static_cast
  // does not compile as C++.
  if (h == nullptr || h == reinterpret_cast<nvtxMemHeapHandle_t>(intptr_t{-1})) {
    // The tool does not take the memory extension (Nsight Systems, say).
    on_.store(false, std::memory_order_relaxed);
    return;
  }
  try {
    heaps_[ptr] = Heap{ptr, bytes, h};
  } catch (...) {
    nvtxMemHeapUnregister(domain(), h);  // unannotated rather than half
  }
}

void NvtxMemory::chunk_release(uint64_t ptr) noexcept {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  auto it = heaps_.find(ptr);
  if (it == heaps_.end()) return;
  nvtxMemHeapUnregister(domain(), static_cast<nvtxMemHeapHandle_t>(it->second.handle));
  // The heap took its regions with it.
  regions_.erase(regions_.lower_bound(ptr), regions_.lower_bound(ptr + it->second.bytes));
  heaps_.erase(it);
}

void NvtxMemory::block(uint64_t ptr, size_t bytes) noexcept {
  if (!on_.load(std::memory_order_relaxed) || bytes == 0) return;
  std::lock_guard<std::mutex> lock(mu_);
  const Heap* heap = heap_of(ptr);
  if (heap == nullptr || bytes > heap->bytes - (ptr - heap->base)) return;
  try {
    if (!regions_.insert(ptr).second) return;  // registered already
  } catch (...) {
    return;  // unannotated rather than untracked
  }
  nvtxMemVirtualRangeDesc_t range{};
  range.size = bytes;
  range.ptr = reinterpret_cast<const void*>(static_cast<uintptr_t>(ptr));
  nvtxMemRegionsRegisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.regionType = NVTX_MEM_TYPE_VIRTUAL_ADDRESS;
  batch.heap = static_cast<nvtxMemHeapHandle_t>(heap->handle);
  batch.regionCount = 1;
  batch.regionDescElementSize = sizeof(range);
  batch.regionDescElements = &range;
  batch.regionHandleElementsOut = nullptr;  // referred to by pointer
  nvtxMemRegionsRegister(domain(), &batch);
}

void NvtxMemory::block_release(uint64_t ptr) noexcept {
  if (!on_.load(std::memory_order_relaxed)) return;
  std::lock_guard<std::mutex> lock(mu_);
  // Never registered, released already, or its chunk is gone (and so is
  // the region): nothing to tell.
  if (regions_.erase(ptr) == 0) return;
  nvtxMemRegionRef_t ref;
  ref.pointer = reinterpret_cast<const void*>(static_cast<uintptr_t>(ptr));
  nvtxMemRegionsUnregisterBatch_t batch{};
  batch.extCompatID = NVTX_EXT_COMPATID_MEM;
  batch.structSize = sizeof(batch);
  batch.refType = NVTX_MEM_REGION_REF_TYPE_POINTER;
  batch.refCount = 1;
  batch.refElementSize = sizeof(ref);
  batch.refElements = &ref;
  nvtxMemRegionsUnregister(domain(), &batch);
}

}  // namespace metrale::backend::cuda_impl
