// The stream-ordered check of freed pads (Backend::pad_check_async): one
// kernel on the stream the blocks were freed on reads and restores their
// pads, and an event after it tells when its results are in. The ranges and
// the results live in page-locked memory mapped into the device, so a pass
// costs a launch and an event record, with no copy and no wait. A few slots
// let passes overlap; when all are in use the caller checks synchronously.
#include <algorithm>
#include <cstring>
#include <mutex>
#include <string>

#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/redzone_layout.hpp"
#include "backend/cuda/redzone_log.hpp"

namespace metrale::backend::cuda_impl {
namespace {


// Passes in flight at once: past this the caller waits (its synchronous
// pass), so a stream far behind the host holds back its frees.
constexpr size_t kMaxSlots = 32;

}  // namespace

CudaBackend::PadCheckSlot* CudaBackend::pad_slot_for(size_t n) {
  PadCheckSlot* slot = nullptr;
  for (PadCheckSlot& s : pad_slots_) {
    if (s.ticket == 0) {
      slot = &s;
      break;
    }
  }
  if (slot == nullptr) {
    if (pad_slots_.size() >= kMaxSlots) return nullptr;
    pad_slots_.emplace_back();
    slot = &pad_slots_.back();
  }
  if (slot->done == nullptr) {
    check(api_.eventCreate(&slot->done, CU_EVENT_DISABLE_TIMING), "cuEventCreate",
          "the red-zone check of freed blocks");
  }
  const size_t need = n * (sizeof(DeviceRange) + sizeof(PadCheck));
  if (need > slot->bytes) {
    const size_t bytes = std::max<size_t>({need, 2 * slot->bytes, 16384});
    if (slot->host != nullptr) api_.memFreeHost(slot->host);
    slot->host = nullptr;
    slot->bytes = 0;
    void* host = nullptr;
    check(api_.memHostAlloc(&host, bytes, CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc",
          "results of the red-zone check of freed blocks");
    CUdeviceptr device = 0;
    const CUresult rc = api_.memHostGetDevicePointer(&device, host, 0);
    if (rc != CUDA_SUCCESS) {
      api_.memFreeHost(host);
      raise(rc, "cuMemHostGetDevicePointer_v2", "results of the red-zone check of freed blocks");
    }
    slot->host = static_cast<unsigned char*>(host);
    slot->device = device;
    slot->bytes = bytes;
  }
  return slot;
}

uint64_t CudaBackend::pad_check_async(const Range* ranges, size_t n, uint8_t byte,
                                      StreamHandle s) {
  if (ranges == nullptr || n == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "cuda backend: pad_check_async with no ranges");
  }
  make_current();
  // Its own allocations beside a capture on this thread (a first slot).
  RelaxedCaptureMode relaxed(api_);  // capture_mode.hpp
  LogAfterUnlock log_after_unlock;
  std::lock_guard<std::mutex> lock(redzone_mutex_);
  redzone_prepare();
  if (redzone_check_restore_ == nullptr) return 0;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api_.streamIsCapturing(as_stream(s), &status), "cuStreamIsCapturing");
  if (status != CU_STREAM_CAPTURE_STATUS_NONE) {
    fail(METRALE_ERROR_CAPTURE,
         "the red-zone check of freed blocks cannot be queued on a capturing stream");
  }
  PadCheckSlot* slot = pad_slot_for(n);
  if (slot == nullptr) return 0;
  auto* staged = reinterpret_cast<DeviceRange*>(slot->host);
  for (size_t i = 0; i < n; ++i) staged[i] = DeviceRange{ranges[i].ptr, ranges[i].bytes};
  CUdeviceptr device_ranges = slot->device;
  CUdeviceptr device_results = slot->device + n * sizeof(DeviceRange);
  unsigned long long count = n;
  unsigned int value = byte;
  void* params[] = {&device_ranges, &count, &value, &device_results};
  const size_t warps_per_block = kThreadsPerBlock / 32;
  const auto blocks =
      static_cast<unsigned int>(std::min((n + warps_per_block - 1) / warps_per_block, kMaxBlocks));
  check(api_.launchKernel(redzone_check_restore_, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0,
                          as_stream(s), params, nullptr),
        "cuLaunchKernel", "metrale_redzone_check_restore");
  const CUresult rc = api_.eventRecord(slot->done, as_stream(s));
  if (rc != CUDA_SUCCESS) {
    // The kernel still reads the slot: it stays free only once that is over.
    api_.streamSynchronize(as_stream(s));
    raise(rc, "cuEventRecord", "the red-zone check of freed blocks");
  }
  slot->ticket = ++next_pad_ticket_;
  slot->n = n;
  return slot->ticket;
}

bool CudaBackend::pad_check_take(uint64_t t, bool wait, PadCheck* out) {
  make_current();
  CUevent done = nullptr;
  {
    std::lock_guard<std::mutex> lock(redzone_mutex_);
    for (const PadCheckSlot& s : pad_slots_) {
      if (t != 0 && s.ticket == t) done = s.done;
    }
  }
  if (done == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "cuda backend: pad check ticket " + std::to_string(t) + " was never issued or is spent");
  }
  // Waited for without the red-zone lock: the pass runs after the user's
  // own work on that stream, which may be long. Only the ticket's owner
  // takes it, so the slot stays as it is meanwhile.
  CUresult rc;
  {
    // A wait beside this thread's capture, and a query beside another
    // thread's global capture: as event_synchronize and event_query.
    RelaxedCaptureMode relaxed(api_);
    rc = wait ? api_.eventSynchronize(done) : api_.eventQuery(done);
  }
  if (rc == CUDA_ERROR_NOT_READY) return false;
  std::lock_guard<std::mutex> lock(redzone_mutex_);
  for (PadCheckSlot& s : pad_slots_) {
    if (s.ticket != t) continue;
    s.ticket = 0;  // spent, also when the pass failed
    if (rc != CUDA_SUCCESS) raise(rc, wait ? "cuEventSynchronize" : "cuEventQuery",
                                  "the red-zone check of freed blocks");
    std::memcpy(out, s.host + s.n * sizeof(DeviceRange), s.n * sizeof(PadCheck));
    return true;
  }
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       "cuda backend: pad check ticket " + std::to_string(t) + " was taken meanwhile");
}

void CudaBackend::pad_slots_release() noexcept {
  for (PadCheckSlot& s : pad_slots_) {
    // A pass still writing its results there: let it finish first.
    if (s.ticket != 0 && s.done != nullptr) api_.eventSynchronize(s.done);
    if (s.done != nullptr) api_.eventDestroy(s.done);
    if (s.host != nullptr) api_.memFreeHost(s.host);
  }
  pad_slots_.clear();
}

}  // namespace metrale::backend::cuda_impl
