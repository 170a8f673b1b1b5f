#include "core/pinned_cache.hpp"

namespace metrale::core {
namespace {

constexpr size_t kPage = 4096;
constexpr size_t kSmallMax = 4 * kPage;  // 16 KiB: page multiples up to here
constexpr unsigned kSmallShift = 14;     // log2(kSmallMax)

unsigned log2_floor(size_t v) { return 63u - static_cast<unsigned>(__builtin_clzll(v)); }

size_t round_up(size_t v, size_t step) { return (v + step - 1) / step * step; }

// Every enabled cache of the process. Lock order: this list, then a
// cache's own mutex (a cache never takes this lock while holding its own).
struct CacheList {
  std::mutex mutex;
  std::vector<const PinnedCache*> caches;
};

CacheList& cache_list() {
  static CacheList* list = new CacheList;  // never destroyed: contexts may outlive statics
  return *list;
}

}  // namespace

PinnedCache::PinnedCache(size_t budget_bytes) : budget_(budget_bytes) {
  if (budget_ == 0) return;
  CacheList& l = cache_list();
  std::lock_guard<std::mutex> lock(l.mutex);
  l.caches.push_back(this);
}

PinnedCache::~PinnedCache() {
  if (budget_ == 0) return;
  CacheList& l = cache_list();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (auto it = l.caches.begin(); it != l.caches.end(); ++it) {
    if (*it == this) {
      l.caches.erase(it);
      break;
    }
  }
}

bool PinnedCache::hidden_anywhere(const void* p, size_t bytes) {
  CacheList& l = cache_list();
  std::lock_guard<std::mutex> lock(l.mutex);
  for (const PinnedCache* c : l.caches) {
    if (c->hides(p, bytes)) return true;
  }
  return false;
}

size_t PinnedCache::class_size(size_t bytes) {
  if (bytes <= kSmallMax) return round_up(bytes == 0 ? 1 : bytes, kPage);
  // 2^p < bytes <= 2^(p+1): four classes 2^p + k * 2^(p-2), k = 1..4.
  const unsigned p = log2_floor(bytes - 1);
  return round_up(bytes, size_t{1} << (p - 2));
}

unsigned PinnedCache::class_index(size_t class_bytes) {
  if (class_bytes <= kSmallMax) return static_cast<unsigned>(class_bytes / kPage) - 1;  // 0..3
  const unsigned p = log2_floor(class_bytes - 1);
  const size_t k = (class_bytes - (size_t{1} << p)) >> (p - 2);  // 1..4
  return 4 + (p - kSmallShift) * 4 + static_cast<unsigned>(k - 1);
}

bool PinnedCache::cacheable(size_t bytes) const {
  // bytes <= budget first: class_size cannot overflow below that.
  return budget_ > 0 && bytes > 0 && bytes <= budget_ && class_size(bytes) <= budget_;
}

size_t PinnedCache::block_bytes(size_t bytes) const {
  return cacheable(bytes) ? class_size(bytes) : bytes;
}

void PinnedCache::link_cached(Node* n) {
  n->cached = true;
  n->older = newest_;
  n->newer = nullptr;
  if (newest_ != nullptr) newest_->newer = n;
  newest_ = n;
  if (oldest_ == nullptr) oldest_ = n;
  Node*& head = class_head_[n->cls];
  n->class_prev = nullptr;
  n->class_next = head;
  if (head != nullptr) head->class_prev = n;
  head = n;
  stats_.cached_bytes += n->block;
  ++stats_.cached_blocks;
}

void PinnedCache::unlink_cached(Node* n) {
  (n->older != nullptr ? n->older->newer : oldest_) = n->newer;
  (n->newer != nullptr ? n->newer->older : newest_) = n->older;
  (n->class_prev != nullptr ? n->class_prev->class_next : class_head_[n->cls]) = n->class_next;
  if (n->class_next != nullptr) n->class_next->class_prev = n->class_prev;
  n->older = n->newer = n->class_prev = n->class_next = nullptr;
  n->cached = false;
  stats_.cached_bytes -= n->block;
  --stats_.cached_blocks;
}

void* PinnedCache::take(size_t bytes) {
  if (!cacheable(bytes)) return nullptr;
  const unsigned cls = class_index(class_size(bytes));
  std::lock_guard<std::mutex> lock(mutex_);
  Node* n = cls < class_head_.size() ? class_head_[cls] : nullptr;
  if (n == nullptr) {
    ++stats_.misses;
    return nullptr;
  }
  unlink_cached(n);
  n->asked = bytes;
  ++stats_.hits;
  ++stats_.live_blocks;
  return reinterpret_cast<void*>(n->base);
}

void PinnedCache::adopt(void* ptr, size_t bytes) {
  if (!cacheable(bytes)) return;
  Node n;
  n.base = reinterpret_cast<uintptr_t>(ptr);
  n.block = class_size(bytes);
  n.asked = bytes;
  n.cls = class_index(n.block);
  std::lock_guard<std::mutex> lock(mutex_);
  if (class_head_.size() <= n.cls) class_head_.resize(n.cls + 1, nullptr);
  nodes_.emplace(n.base, n);
  ++stats_.live_blocks;
}

bool PinnedCache::put(void* ptr, std::vector<Block>* evicted) noexcept {
  if (budget_ == 0) return false;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = nodes_.find(reinterpret_cast<uintptr_t>(ptr));
  if (it == nodes_.end() || it->second.cached) return false;
  link_cached(&it->second);
  --stats_.live_blocks;
  // Oldest first, never the block just cached: its class fits the budget.
  while (stats_.cached_bytes > budget_ && oldest_ != nullptr) {
    Node* old = oldest_;
    // Handed over before unlinking. Without memory for the list the cache
    // stays over budget until the next put or trim: never a lost block.
    try {
      evicted->push_back({reinterpret_cast<void*>(old->base), old->block});
    } catch (...) {
      break;
    }
    unlink_cached(old);
    nodes_.erase(old->base);
  }
  return true;
}

std::vector<PinnedCache::Block> PinnedCache::trim(size_t keep_bytes) {
  std::vector<Block> out;
  std::lock_guard<std::mutex> lock(mutex_);
  while (stats_.cached_bytes > keep_bytes && oldest_ != nullptr) {
    Node* old = oldest_;
    out.push_back({reinterpret_cast<void*>(old->base), old->block});
    unlink_cached(old);
    nodes_.erase(old->base);
  }
  return out;
}

bool PinnedCache::hides(const void* p, size_t bytes) const {
  if (budget_ == 0 || bytes == 0) return false;
  const uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  const uintptr_t hi = lo + bytes < lo ? UINTPTR_MAX : lo + bytes;
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = nodes_.upper_bound(lo);
  if (it != nodes_.begin()) --it;  // the block that may hold lo
  for (; it != nodes_.end() && it->first < hi; ++it) {
    const Node& n = it->second;
    // The hidden part: all of a cached block, the slack of a live one.
    const uintptr_t h_lo = n.cached ? n.base : n.base + n.asked;
    const uintptr_t h_hi = n.base + n.block;
    if (h_lo < hi && lo < h_hi) return true;
  }
  return false;
}

PinnedCache::Stats PinnedCache::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace metrale::core
