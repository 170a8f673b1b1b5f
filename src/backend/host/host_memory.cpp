// Device, managed and pinned memory are 256-byte aligned host blocks; each
// is recorded in the region map so later device ranges can be checked.
#include <atomic>
#include <cstdlib>
#include <memory>
#include <string>

#include "backend/host/host_backend.hpp"
#include "backend/host/process_pins.hpp"
#include "backend/log_sink.hpp"

namespace metrale::backend::host {

namespace {

// cuMemAlloc's granularity and alignment, so slack and alignment match.
constexpr size_t kAllocAlign = 256;

std::string mib(size_t bytes) { return std::to_string(bytes / (1024 * 1024)) + " MiB"; }

}  // namespace

DevPtr HostBackend::allocate_owned(size_t bytes, size_t* reserved, RegionKind kind) {
  fault_.throw_if_lost();
  const char* what = region_kind_name(kind);
  if (bytes == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: a ") + what + " allocation of 0 bytes");
  }
  // Overcommit would hand out far more than the machine has and kill the
  // process on first touch; refuse what can never fit instead.
  if (bytes > physical_memory_ || bytes > SIZE_MAX - (kAllocAlign - 1)) {
    fail(METRALE_ERROR_OUT_OF_MEMORY,
         std::string("host backend: cannot allocate ") + std::to_string(bytes) + " bytes of " +
             what + " memory: the host has " + std::to_string(physical_memory_) + " bytes (" +
             mib(physical_memory_) + ") of physical memory");
  }
  const size_t rounded = (bytes + kAllocAlign - 1) & ~(kAllocAlign - 1);
  void* block = std::aligned_alloc(kAllocAlign, rounded);
  if (block == nullptr) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, std::string("host backend: aligned_alloc of ") +
                                          std::to_string(rounded) + " bytes of " + what +
                                          " memory failed");
  }
  const auto base = reinterpret_cast<uintptr_t>(block);
  try {
    regions_.add_owned(base, rounded, kind);
  } catch (...) {
    std::free(block);
    throw;
  }
  // Pins on this address (any context's) are stale: its memory was freed
  // without host_unregister and the allocator handed it out again.
  ProcessPins::instance().drop_overlapping(base, rounded);
  if (reserved != nullptr) *reserved = rounded;
  return base;
}

DevPtr HostBackend::mem_alloc(size_t bytes, size_t* reserved) {
  return allocate_owned(bytes, reserved, RegionKind::Device);
}

DevPtr HostBackend::mem_alloc_managed(size_t bytes, size_t* reserved) {
  return allocate_owned(bytes, reserved, RegionKind::Managed);
}

// A freed block and the running ops it waits for: one share per op, and one
// for the free; the last share dropped frees it.
struct HostBackend::PendingFree {
  explicit PendingFree(void* b) : block(b) {}
  void drop() noexcept {
    if (left.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
    if (!keep_block) std::free(block);
    delete this;
  }
  void* const block;
  // Set before the freeing thread's own drop: the block is never freed
  // (no memory to queue its release behind a running op), this record is.
  bool keep_block = false;
  std::atomic<size_t> left{1};
};

// Allowed on a lost context: cleanup must work.
void HostBackend::mem_free(DevPtr ptr) {
  if (ptr == 0) return;
  if (fail_free_at_ != 0 && free_calls_.fetch_add(1) + 1 == fail_free_at_) {
    fail(METRALE_ERROR_DRIVER, "host backend: mem_free of " + describe_address(ptr) +
                                   " failed: injected by METRALE_TEST_HOST_FAIL_FREE=" +
                                   std::to_string(fail_free_at_) + " (a test hook)");
  }
  // Made before the region goes (the only step that may run out of
  // memory), so a failed free leaves the memory allocated.
  auto pending = std::make_unique<PendingFree>(reinterpret_cast<void*>(ptr));
  if (!regions_.remove(ptr, {RegionKind::Device, RegionKind::Managed})) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: mem_free of " + describe_address(ptr) +
             " which is not the start of device or managed memory this backend allocated");
  }
  free_after_running_work(pending.release());
}

// cuMemFree waits for the device's work before the memory goes back. A
// host stream runs its work in the thread that puts it there, so the only
// work a free can overtake is an op another thread is running right now (a
// host kernel still reading or writing the block): the memory goes back to
// the C heap when the last such op ends, at once when none runs. The free
// itself never waits: its caller may be a host kernel (whose own stream's
// op is the caller itself, and whom a kernel on another stream may be
// waiting for) or hold a lock of the core's that such a kernel waits for
// (the pool's, giving a chunk back), and either wait would deadlock. The
// block has left the region map already: no later call accepts it.
void HostBackend::free_after_running_work(PendingFree* pending) noexcept {
  bool kept = false;
  streams_.for_each([&](HostStream& stream) {
    if (kept) return;
    pending->left.fetch_add(1, std::memory_order_relaxed);
    try {
      // At once, here, when no other thread runs the stream's work (or
      // this one does: a host kernel freeing is not waited for); else by
      // that thread as its op ends. A raw pointer: the std::function
      // holds it without allocating.
      stream.mutex.run_or_defer([pending] { pending->drop(); });
    } catch (...) {
      // No memory to queue it behind the running op: the block stays
      // allocated (never freed) rather than freed under that op. Its
      // count back: nothing was queued (the caller's own count holds it).
      pending->left.fetch_sub(1, std::memory_order_relaxed);
      kept = true;
    }
  });
  const uintptr_t block = reinterpret_cast<uintptr_t>(pending->block);
  pending->keep_block = kept;
  pending->drop();  // the record may be gone after this
  if (!kept) return;
  // Outside the table's lock: a log callback may call the library.
  try {
    backend::log(METRALE_LOG_WARN,
        "host backend: no memory to queue the free of " + describe_address(block) +
            " behind a host kernel another thread is running: the block stays allocated "
            "(leaked) rather than freed under that kernel; the free itself succeeded");
  } catch (...) {
    // No memory for the line either: the leak goes unlogged.
  }
}

void* HostBackend::host_alloc_pinned(size_t bytes) {
  if (fail_pinned_at_ != 0 && pinned_calls_.fetch_add(1) + 1 == fail_pinned_at_) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, "host backend: host_alloc_pinned of " + std::to_string(bytes) +
                                          " bytes failed: injected by "
                                          "METRALE_TEST_HOST_FAIL_PINNED=" +
                                          std::to_string(fail_pinned_at_) + " (a test hook)");
  }
  const DevPtr base = allocate_owned(bytes, nullptr, RegionKind::Pinned);
  ProcessPins::instance().add(base, bytes, this);
  return reinterpret_cast<void*>(base);
}

void HostBackend::host_free_pinned(void* ptr) {
  if (ptr == nullptr) return;
  if (!regions_.remove(reinterpret_cast<uintptr_t>(ptr), {RegionKind::Pinned})) {
    fail(METRALE_ERROR_NOT_FOUND, "host backend: host_free_pinned of " +
                                      describe_address(reinterpret_cast<uintptr_t>(ptr)) +
                                      " which host_alloc_pinned did not return");
  }
  ProcessPins::instance().remove(reinterpret_cast<uintptr_t>(ptr), this);
  std::free(ptr);
}

void HostBackend::host_register(void* ptr, size_t bytes) {
  fault_.throw_if_lost();
  if (ptr == nullptr || bytes == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: host_register needs a non-NULL pointer and a non-zero size");
  }
  const auto base = reinterpret_cast<uintptr_t>(ptr);
  regions_.add_registered(base, bytes);  // refuses overlaps with this backend's memory
  if (!ProcessPins::instance().add_if_free(base, bytes, this)) {
    // Pinned elsewhere in the process (another context): the driver
    // refuses to register pages twice (CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED).
    regions_.remove(base, {RegionKind::Registered});
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: host_register range " +
                                             describe_range(base, bytes) +
                                             " overlaps host memory already pinned in this "
                                             "process (by another context)");
  }
}

void HostBackend::host_unregister(void* ptr) {
  if (!regions_.remove(reinterpret_cast<uintptr_t>(ptr), {RegionKind::Registered})) {
    fail(METRALE_ERROR_NOT_FOUND, "host backend: host_unregister of " +
                                      describe_address(reinterpret_cast<uintptr_t>(ptr)) +
                                      " which is not the start of a registered range");
  }
  ProcessPins::instance().remove(reinterpret_cast<uintptr_t>(ptr), this);
}

DevPtr HostBackend::host_device_pointer(void* ptr) {
  fault_.throw_if_lost();
  Region region;
  const auto address = reinterpret_cast<uintptr_t>(ptr);
  const bool ours = ptr != nullptr && regions_.find(address, &region) &&
                    (region.kind == RegionKind::Pinned || region.kind == RegionKind::Registered);
  // Memory another context pinned is mapped too, as the driver maps
  // portable pinned memory for every context: the address is the same.
  if (!ours && (ptr == nullptr || !ProcessPins::instance().covers(address, 1))) {
    fail(METRALE_ERROR_NOT_FOUND, "host backend: " + describe_address(address) +
                                      " is not in pinned or registered host memory");
  }
  return address;
}

}  // namespace metrale::backend::host

namespace metrale::backend::host {

bool HostBackend::host_range_pinned(const void* ptr, size_t bytes) {
  return ProcessPins::instance().covers(reinterpret_cast<uintptr_t>(ptr), bytes);
}

// The same test every copy makes at enqueue (RegionMap::check), answered
// instead of thrown.
bool HostBackend::device_range_known(DevPtr ptr, size_t bytes) {
  Region r{};
  if (bytes == 0 || !regions_.find(ptr, &r)) return false;
  return bytes <= r.bytes - (ptr - r.base);
}

}  // namespace metrale::backend::host
