// An allocator for node containers (std::set, std::map) that keeps freed
// nodes of its own container on a free list instead of returning them to
// malloc: the pool's free index inserts and erases a node on every
// allocation and free, and malloc's own locks and bookkeeping were the
// largest share of that cost. Each container has its own list (the state is
// in the allocator object), so it is as thread-safe as the container: the
// pool's lock covers it. Only single-object allocations are recycled.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace metrale::core::pool {

template <typename T>
class NodeRecycler {
 public:
  using value_type = T;
  template <typename U>
  struct rebind {
    using other = NodeRecycler<U>;
  };

  NodeRecycler() = default;
  template <typename U>
  NodeRecycler(const NodeRecycler<U>&) {}  // a fresh, empty list
  NodeRecycler(const NodeRecycler&) {}
  NodeRecycler& operator=(const NodeRecycler&) { return *this; }
  ~NodeRecycler() {
    for (void* p : spare_) ::operator delete(p);
  }

  T* allocate(size_t n) {
    if (n == 1 && !spare_.empty()) {
      void* p = spare_.back();
      spare_.pop_back();
      return static_cast<T*>(p);
    }
    return static_cast<T*>(::operator new(n * sizeof(T)));
  }
  // Never throws: the containers call it from erase, where an exception
  // ends the process (std::terminate). Short of memory for the list, the
  // node goes back to operator delete instead.
  void deallocate(T* p, size_t n) noexcept {
    if (n == 1) {
      try {
        spare_.push_back(p);
        return;
      } catch (...) {
        // Falls through: the node goes to operator delete below.
      }
    }
    ::operator delete(p);
  }

  template <typename U>
  bool operator==(const NodeRecycler<U>&) const { return false; }
  template <typename U>
  bool operator!=(const NodeRecycler<U>&) const { return true; }

 private:
  std::vector<void*> spare_;
};

}  // namespace metrale::core::pool
