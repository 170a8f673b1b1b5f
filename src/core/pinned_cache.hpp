// The pinned host pool (issue 10, item 5): freed page-locked blocks kept by
// size class so that metrale_host_alloc_pinned serves a recurring size
// without the driver (cuMemHostAlloc costs ~0.7 ms on an H200; a hit here is
// a mutex and a list pop).
//
// Whole blocks only, no splitting: a request is rounded up to its size
// class, a miss allocates a block of exactly the class size, and a free
// puts the block on its class's list. What is cached is bounded by a byte
// budget; past it the oldest cached blocks (of any class) go back to the
// caller for freeing. The class keeps the waste of one block under 25%.
//
// The cache knows nothing of the backend, the registry or the bounds index:
// it hands blocks back to the context, which frees them outside the lock.
// Every method is thread-safe (one mutex; nothing under it but list and map
// operations: no backend call, no log line).
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <vector>

namespace metrale::core {

class PinnedCache {
 public:
  // 256 MiB of cached page-locked memory. Page-locked memory cannot be
  // swapped or reclaimed by the OS, so the cache must not grow with the
  // program's peak: 256 MiB holds a few staging buffers or batches of
  // common sizes (the goal row is 1 MiB) while staying a small share of any
  // host that drives an H200-class GPU. metrale_pool_trim and context
  // destroy give it all back.
  static constexpr size_t kDefaultBudget = size_t{256} << 20;

  // A block as the backend allocated it: ptr and its full size (the class).
  struct Block {
    void* ptr;
    size_t bytes;
  };

  struct Stats {
    uint64_t hits = 0;          // take() answered from the cache
    uint64_t misses = 0;        // take() of a cacheable size found nothing
    size_t cached_bytes = 0;    // block bytes waiting in the cache
    size_t cached_blocks = 0;
    size_t live_blocks = 0;     // blocks of the cache handed out now
  };

  // budget_bytes 0 turns the cache off: take() misses, put() keeps nothing.
  // An enabled cache joins the process-wide list hidden_anywhere() asks.
  explicit PinnedCache(size_t budget_bytes);
  ~PinnedCache();
  PinnedCache(const PinnedCache&) = delete;
  PinnedCache& operator=(const PinnedCache&) = delete;

  bool enabled() const { return budget_ > 0; }
  size_t budget() const { return budget_; }

  // The size class of a request of bytes (>= 1): multiples of 4 KiB up to
  // 16 KiB, then four classes per power of two. Pure.
  static size_t class_size(size_t bytes);

  // True when a block for a request of bytes may be cached: the cache is
  // on and the class fits the budget.
  bool cacheable(size_t bytes) const;

  // The size the backend should allocate for a request of bytes: its class
  // when the cache may keep the block, else bytes itself (cache off, 0, or
  // a class larger than the budget: such blocks bypass the cache).
  size_t block_bytes(size_t bytes) const;

  // A cached block of bytes' class, newest freed first (its pages are the
  // warmest), now live with bytes as the size asked; nullptr on a miss.
  void* take(size_t bytes);

  // Tracks a block the backend just allocated with block_bytes(bytes) for a
  // request of bytes (a miss), so that put() may keep it. No-op for a size
  // that bypasses the cache. Throws std::bad_alloc (nothing tracked then).
  void adopt(void* ptr, size_t bytes);

  // A live block the caller freed. True: the cache keeps it. False: it is
  // not a block of the cache (bypassed or never adopted); the caller frees
  // it. Blocks the budget pushes out, oldest first, are appended to
  // *evicted; the caller frees them (outside any lock of its own). Never
  // throws (without memory for *evicted it evicts later).
  bool put(void* ptr, std::vector<Block>* evicted) noexcept;

  // Removes cached blocks, oldest first, until at most keep_bytes stay
  // cached, and returns them for the caller to free. Live blocks stay.
  std::vector<Block> trim(size_t keep_bytes);

  // True when [p, p+bytes) touches memory the driver holds page-locked for
  // the cache but no caller owns as pinned memory: a cached block, or the
  // slack of a live block past the size asked. The context answers "not
  // pinned" for such ranges, as it did before the cache existed.
  bool hides(const void* p, size_t bytes) const;
  // hides() of every enabled cache in the process: what any context's pool
  // holds is nobody's pinned memory, so every context answers for it as it
  // did before pools existed (another context would otherwise ask the
  // driver, which still holds the block page-locked).
  static bool hidden_anywhere(const void* p, size_t bytes);

  Stats stats() const;

 private:
  struct Node {
    uintptr_t base = 0;
    size_t block = 0;   // block bytes (the class size)
    size_t asked = 0;   // bytes asked by the live owner
    bool cached = false;
    unsigned cls = 0;
    Node* older = nullptr;  // age list of cached blocks, all classes
    Node* newer = nullptr;
    Node* class_prev = nullptr;  // this class's cached blocks, newest first
    Node* class_next = nullptr;
  };

  static unsigned class_index(size_t class_bytes);
  void link_cached(Node* n);    // newest in its class and in age
  void unlink_cached(Node* n);  // out of both lists

  const size_t budget_;
  mutable std::mutex mutex_;
  std::map<uintptr_t, Node> nodes_;  // every block of the cache, live or cached
  std::vector<Node*> class_head_;    // newest cached block per class index
  Node* oldest_ = nullptr;
  Node* newest_ = nullptr;
  Stats stats_;
};

}  // namespace metrale::core
