// The caching pool with the address-keyed bookkeeping its real caller (the
// context's ledger) provides: tests and the core benchmark allocate and free
// by address, as the ledger does, with the Block* kept beside the address.
// Thread-safe (the map has its own lock, taken outside the pool's).
#pragma once

#include <mutex>
#include <unordered_map>

#include "core/pool/caching_pool.hpp"

namespace pooltest {

using metrale::core::pool::Block;
using metrale::core::pool::CachingPool;
using metrale::core::pool::ChunkSource;
using metrale::core::pool::DevPtr;
using metrale::core::pool::PoolStats;
using metrale::core::pool::StreamId;

class PoolByAddress {
 public:
  explicit PoolByAddress(ChunkSource& src) : pool_(src) {}

  DevPtr allocate(size_t bytes, StreamId s, bool capturing = false) {
    Block* b = pool_.allocate(bytes, s, capturing);
    std::lock_guard<std::mutex> l(mu_);
    blocks_[b->ptr] = b;
    return b->ptr;
  }
  bool free(DevPtr p) {
    Block* b = take(p);
    if (b == nullptr) return false;
    pool_.free(b);
    return true;
  }
  bool free_on(DevPtr p, StreamId s) {
    Block* b = take(p);
    if (b == nullptr) return false;
    try {
      pool_.free_on(b, s);
    } catch (...) {
      std::lock_guard<std::mutex> l(mu_);
      blocks_[p] = b;  // refused: still handed out
      throw;
    }
    return true;
  }
  bool record_stream(DevPtr p, StreamId s) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end()) return false;
    pool_.record_stream(it->second, s);
    return true;
  }
  size_t block_size(DevPtr p) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = blocks_.find(p);
    return it == blocks_.end() ? 0 : it->second->size;
  }
  size_t trim(size_t keep) { return pool_.trim(keep); }
  PoolStats stats() const { return pool_.stats(); }
  void reset_peak() { pool_.reset_peak(); }
  void retire_stream(StreamId gone, StreamId heir) { pool_.retire_stream(gone, heir); }
  void stream_born(StreamId s) { pool_.stream_born(s); }
  metrale::core::FastMutex& lock() { return pool_.lock(); }
  void set_stream(DevPtr p, StreamId s) {
    std::lock_guard<std::mutex> l(mu_);
    pool_.set_stream(blocks_.at(p), s);
  }

 private:
  Block* take(DevPtr p) {
    std::lock_guard<std::mutex> l(mu_);
    auto it = blocks_.find(p);
    if (it == blocks_.end()) return nullptr;
    Block* b = it->second;
    blocks_.erase(it);
    return b;
  }

  CachingPool pool_;
  std::mutex mu_;
  std::unordered_map<DevPtr, Block*> blocks_;
};

}  // namespace pooltest
