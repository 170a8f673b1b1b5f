// Host memory page-locked anywhere in the process, as the host backend's
// stand-in for the driver's knowledge. With CUDA, pinning is a property of
// the pages, known to the driver whoever pinned them (another context, the
// CUDA runtime, PyTorch's pin_memory); every host backend instance records
// what it pins here, so one context sees memory another one pinned, as it
// would on a GPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>

namespace metrale::backend::host {

class ProcessPins {
 public:
  static ProcessPins& instance();

  // Records [base, base+bytes) as pinned by `owner` (a backend instance).
  void add(uintptr_t base, size_t bytes, const void* owner);
  // add, unless a byte of the range is pinned already (by anyone: the
  // driver refuses to register pages twice); false then, nothing recorded.
  bool add_if_free(uintptr_t base, size_t bytes, const void* owner);
  // Forgets the range starting at base that `owner` recorded, if any.
  void remove(uintptr_t base, const void* owner);
  // Forgets every range `owner` recorded (its teardown).
  void remove_owner(const void* owner);
  // Forgets ranges overlapping [base, base+bytes): that memory was freed and
  // handed out again without being unregistered.
  void drop_overlapping(uintptr_t base, size_t bytes);
  // True when every byte of [p, p+bytes) lies in some pinned range (ranges
  // that touch or overlap count together). bytes 0 or a range that wraps
  // the address space: false.
  bool covers(uintptr_t p, size_t bytes) const;

 private:
  struct Entry {
    size_t bytes;
    const void* owner;
  };
  mutable std::mutex mutex_;
  std::multimap<uintptr_t, Entry> ranges_;  // by base; two owners may pin one range
};

}  // namespace metrale::backend::host
