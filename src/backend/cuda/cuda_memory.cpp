// Device, managed and page-locked host memory.
#include <cstdint>
#include <cstdio>
#include <string>

#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {
namespace {

// What cuMemAlloc really sets aside for a request: the driver hands out
// device memory in pieces aligned to (at least) 512 bytes, so nothing else
// can use the tail of a smaller request. The true granularity of the
// driver's suballocator is not documented and may be coarser; 512 is the
// documented-safe lower bound, used for device and managed memory alike.
constexpr size_t kAllocGranularity = 512;

size_t rounded(size_t bytes) {
  if (bytes > SIZE_MAX - (kAllocGranularity - 1)) return bytes;
  return (bytes + kAllocGranularity - 1) / kAllocGranularity * kAllocGranularity;
}

std::string mib(size_t bytes) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.1f MiB", static_cast<double>(bytes) / (1024.0 * 1024.0));
  return buf;
}

}  // namespace

DevPtr CudaBackend::mem_alloc(size_t bytes, size_t* reserved) {
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUdeviceptr ptr = 0;
  CUresult rc = api_.memAlloc(&ptr, bytes);
  if (rc != CUDA_SUCCESS) {
    std::string detail = "requested " + std::to_string(bytes) + " bytes";
    size_t free_b = 0, total_b = 0;
    if (rc == CUDA_ERROR_OUT_OF_MEMORY && api_.memGetInfo(&free_b, &total_b) == CUDA_SUCCESS)
      detail += " (device reports " + mib(free_b) + " free of " + mib(total_b) + ")";
    raise(rc, "cuMemAlloc_v2", detail);
  }
  if (reserved != nullptr) *reserved = rounded(bytes);
  return static_cast<DevPtr>(ptr);
}

DevPtr CudaBackend::mem_alloc_managed(size_t bytes, size_t* reserved) {
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUdeviceptr ptr = 0;
  CUresult rc = api_.memAllocManaged(&ptr, bytes, CU_MEM_ATTACH_GLOBAL);
  if (rc != CUDA_SUCCESS)
    raise(rc, "cuMemAllocManaged",
          "requested " + std::to_string(bytes) +
              " bytes of managed memory (check system swap space: swapon --show)");
  if (reserved != nullptr) *reserved = rounded(bytes);
  return static_cast<DevPtr>(ptr);
}

void CudaBackend::mem_free(DevPtr ptr) {
  if (ptr == 0) return;
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUresult rc = api_.memFree(static_cast<CUdeviceptr>(ptr));
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) {
    char where[32];
    std::snprintf(where, sizeof where, "ptr 0x%llx", static_cast<unsigned long long>(ptr));
    raise(rc, "cuMemFree_v2", where);
  }
}

void* CudaBackend::host_alloc_pinned(size_t bytes) {
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  void* ptr = nullptr;
  // DEVICEMAP: kernels may read it through host_device_pointer; PORTABLE:
  // pinned for every context, not only ours.
  CUresult rc =
      api_.memHostAlloc(&ptr, bytes, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (rc != CUDA_SUCCESS)
    raise(rc, "cuMemHostAlloc", "requested " + std::to_string(bytes) + " bytes of pinned memory");
  return ptr;
}

void CudaBackend::host_free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUresult rc = api_.memFreeHost(ptr);
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuMemFreeHost");
}

void CudaBackend::host_register(void* ptr, size_t bytes) {
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUresult rc = api_.memHostRegister(ptr, bytes,
                                     CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
  if (rc != CUDA_SUCCESS)
    raise(rc, "cuMemHostRegister_v2", "range of " + std::to_string(bytes) + " bytes");
}

void CudaBackend::host_unregister(void* ptr) {
  make_current();
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  CUresult rc = api_.memHostUnregister(ptr);
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuMemHostUnregister");
}

DevPtr CudaBackend::host_device_pointer(void* ptr) {
  make_current();
  // The pointer attribute answers for any pinned memory (ours, another
  // context's, the CUDA runtime's) and for interior pointers.
  CUdeviceptr dptr = 0;
  CUresult rc = api_.pointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER,
                                         reinterpret_cast<CUdeviceptr>(ptr));
  if (rc == CUDA_SUCCESS && dptr != 0) return static_cast<DevPtr>(dptr);
  if (is_sticky(rc)) raise(rc, "cuPointerGetAttribute", "CU_POINTER_ATTRIBUTE_DEVICE_POINTER");
  rc = api_.memHostGetDevicePointer(&dptr, ptr, 0);
  if (rc == CUDA_ERROR_INVALID_VALUE) {
    char where[48];
    std::snprintf(where, sizeof where, "0x%llx",
                  static_cast<unsigned long long>(reinterpret_cast<uintptr_t>(ptr)));
    fail(METRALE_ERROR_NOT_FOUND,
         std::string(where) + " is not host memory mapped for the device (not pinned, or "
                              "pinned without CU_MEMHOSTALLOC_DEVICEMAP / "
                              "CU_MEMHOSTREGISTER_DEVICEMAP): " +
             failure_message(&api_, "cuMemHostGetDevicePointer_v2", rc),
         static_cast<int>(rc));
  }
  check(rc, "cuMemHostGetDevicePointer_v2");
  return static_cast<DevPtr>(dptr);
}

// PyTorch's is_pinned asks the same question (memory type HOST). A range is
// pinned only over all its bytes: the allocation holding its first byte is
// followed to its end, then the next one, until the range is covered.
bool CudaBackend::host_range_pinned(const void* ptr, size_t bytes) {
  const auto lo = reinterpret_cast<uintptr_t>(ptr);
  if (bytes == 0 || lo + bytes < lo) return false;
  const uintptr_t last = lo + bytes - 1;
  make_current();
  // The host memory holding `at`: false when it is not pinned; *end gets the
  // end of its allocation, or 0 when the driver does not say.
  auto pinned_at = [&](uintptr_t at, uintptr_t* end) {
    unsigned int type = 0;
    CUdeviceptr start = 0;
    size_t size = 0;
    CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                   CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                   CU_POINTER_ATTRIBUTE_RANGE_SIZE};
    void* data[] = {&type, &start, &size};
    // Unlike cuPointerGetAttribute, this answers SUCCESS with type 0 for
    // memory the driver does not know (pageable).
    CUresult rc = api_.pointerGetAttributes(3, attrs, data, static_cast<CUdeviceptr>(at));
    if (rc != CUDA_SUCCESS) {
      if (is_sticky(rc)) raise(rc, "cuPointerGetAttributes");
      return false;  // a pointer it cannot describe is not one it pinned
    }
    if (type != CU_MEMORYTYPE_HOST) return false;
    const bool range_ok = size != 0 && start <= at && at - start < size;
    *end = range_ok ? static_cast<uintptr_t>(start + size) : 0;
    return true;
  };
  uintptr_t at = lo;
  for (int hops = 0; hops < 64; ++hops) {
    uintptr_t end = 0;
    if (!pinned_at(at, &end)) return false;
    if (end == 0 || end <= at) {
      // No range from the driver: the last byte is the best it can confirm.
      return at == last || pinned_at(last, &end);
    }
    if (end > last) return true;
    at = end;
  }
  uintptr_t end = 0;
  return pinned_at(last, &end);  // very fragmented: settle for both ends
}

// The allocation the driver says holds ptr (device, managed or mapped host
// memory) must hold the whole range. A pointer the driver cannot describe
// is not vouched for: the direct copy then reports what is wrong with it.
bool CudaBackend::device_range_known(DevPtr ptr, size_t bytes) {
  if (bytes == 0 || ptr + bytes < ptr) return false;
  make_current();
  CUdeviceptr start = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void* data[] = {&start, &size};
  CUresult rc = api_.pointerGetAttributes(2, attrs, data, static_cast<CUdeviceptr>(ptr));
  if (rc != CUDA_SUCCESS) {
    if (is_sticky(rc)) raise(rc, "cuPointerGetAttributes");
    return false;
  }
  if (size == 0 || start > ptr) return false;
  const uint64_t into = ptr - static_cast<uint64_t>(start);
  return into < size && bytes <= size - into;
}

}  // namespace metrale::backend::cuda_impl
