// The floor of an allocator: an exact-size cache (sizes rounded to 512 B),
// one mutex, two hash maps, no ledger, no streams. bench_pool's cold part
// and torch_alloc_probe.cpp's pluggable_floor both measure the library
// against it, so it is one piece. Backing is called (outside the lock) for
// a size with nothing cached: void* backing(size_t bytes), nullptr when out
// of memory. Blocks are never given back to the backing: the owner walks
// them with for_each_block when it wants to.
#pragma once

#include <cstddef>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace bench {

template <class Backing>
class FloorCache {
 public:
  explicit FloorCache(Backing backing) : backing_(std::move(backing)) {}

  // A block of at least `bytes`; nullptr when bytes is 0 or the backing fails.
  void* alloc(size_t bytes) {
    if (bytes == 0) return nullptr;
    const size_t rounded = (bytes + 511) & ~size_t{511};
    void* p = nullptr;
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = cached_.find(rounded);
      if (it != cached_.end() && !it->second.empty()) {
        p = it->second.back();
        it->second.pop_back();
      }
    }
    if (p == nullptr && (p = backing_(rounded)) == nullptr) return nullptr;
    std::lock_guard<std::mutex> lock(mu_);
    live_[p] = rounded;
    return p;
  }
  // Caches p again; false (nothing changed) when p is not a live block of this cache.
  bool free(void* p) {
    std::lock_guard<std::mutex> lock(mu_);
    auto it = live_.find(p);
    if (it == live_.end()) return false;
    cached_[it->second].push_back(p);
    live_.erase(it);
    return true;
  }
  // f(block) for every block the backing gave, cached or live.
  template <class F>
  void for_each_block(F&& f) {
    std::lock_guard<std::mutex> lock(mu_);
    for (auto& kv : cached_)
      for (void* p : kv.second) f(p);
    for (auto& kv : live_) f(kv.first);
  }

 private:
  Backing backing_;
  std::mutex mu_;
  std::unordered_map<size_t, std::vector<void*>> cached_;  // rounded size -> blocks
  std::unordered_map<void*, size_t> live_;                 // block -> rounded size
};

}  // namespace bench
