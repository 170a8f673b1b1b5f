// NVTX memory annotations for the cuda backend (see Backend::mem_annotate_*):
// each pool chunk becomes an NVTX sub-allocator heap, each block handed out
// a region in it, so that compute-sanitizer's memcheck reports an access to
// a chunk byte that no live block covers (rounding slack, a freed block).
//
// NVTX3 is header-only (nvtx3/ in the CUDA toolkit): nothing links at build
// time. The first NVTX call loads the tool's injection library named by
// NVTX_INJECTION64_PATH (compute-sanitizer and Nsight set it). Without that
// variable begin() answers false and never makes an NVTX call, so a program
// run without a tool pays nothing: core does not even call the hooks.
//
// Thread safety: every method is thread-safe (one mutex guards the heaps;
// the NVTX calls are made with it held, so a block is never registered in a
// heap that another thread is unregistering). The mutex is taken only while
// annotations are on, i.e. under a tool.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <set>

namespace metrale::backend::cuda_impl {

class NvtxMemory {
 public:
  // Turns annotations on; returns whether they are on. Call with the device
  // context current: compute-sanitizer wants CUDA initialised before the
  // first NVTX call. Without `force`, only when a tool is attached: false,
  // and no NVTX call at all, when NVTX_INJECTION64_PATH is unset. With it,
  // NVTX3 itself finds out at the first chunk (for a tool attached some
  // other way). Always false when built without the NVTX3 headers.
  bool begin(bool force);
  // No-ops unless begin() answered true. A tool that does not take the
  // memory extension (the first heap registration returns no handle) turns
  // the annotations off for good.
  void chunk(uint64_t ptr, size_t bytes) noexcept;
  void chunk_release(uint64_t ptr) noexcept;
  // Ignored when [ptr, ptr+bytes) lies in no one registered chunk, or bytes is
  // 0 (no region then: every access is out of bounds). A release of a
  // block that has no region (never registered, released already, or its
  // chunk released) is ignored too.
  void block(uint64_t ptr, size_t bytes) noexcept;
  void block_release(uint64_t ptr) noexcept;

 private:
  struct Heap {
    uint64_t base;
    size_t bytes;
    void* handle;  // nvtxMemHeapHandle_t
  };
  // The heap holding ptr, or nullptr. Needs mu_.
  const Heap* heap_of(uint64_t ptr) const;

  std::atomic<bool> on_{false};
  std::mutex mu_;
  std::map<uint64_t, Heap> heaps_;  // by chunk base
  std::set<uint64_t> regions_;      // registered block addresses
};

}  // namespace metrale::backend::cuda_impl
