// Recently freed blocks of one stream, kept by exact size and not
// coalesced: the stream's next allocation of that size takes one back with
// no tree lookup, split or merge (the loop that allocates and frees the
// same shapes every step, which is most of what a framework does). Bins are
// bounded, and the pool empties them into the free index, where blocks
// coalesce, whenever it needs the whole picture: before a new chunk, a look
// from another stream, a trim, a stream's retirement, a capture.
//
// A bitmap marks the small bins that hold blocks: a drain or a largest()
// reads 4 cache lines and the bins in use, not all 2048 bins (32 KiB), which
// a training step with changing shapes did on most of its allocations.
//
// Not thread-safe: the pool's lock guards it, as the rest of StreamState.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>

#include "core/pool/block.hpp"
#include "core/pool/size_class.hpp"

namespace metrale::core::pool {

class ReuseBins {
 public:
  static constexpr uint32_t kMaxPerBin = 64;
  // The least a bin keeps of blocks with a checked red-zone pattern: the
  // pool keeps twice the check's batch (CachingPool::set_checked_bin_cap).
  static constexpr uint32_t kMaxPerBinChecked = 512;

  // A binned block of exactly `size` bytes, nullptr when none.
  Block* take(size_t size) {
    Bin* bin = find(size);
    if (bin == nullptr || bin->head == nullptr) return nullptr;
    Block* b = bin->head;
    bin->head = b->bin_next;
    b->bin_next = nullptr;
    --bin->count;
    --blocks_;
    if (bin->head == nullptr) mark(size, false);
    return b;
  }
  // Bins b (state BINNED); false when its bin holds cap blocks or there is no bin
  // for its size (the caller puts it into the free index instead).
  bool put(Block* b, uint32_t cap = kMaxPerBin) {
    Bin* bin = find_or_add(b->size);
    if (bin == nullptr || bin->count >= cap) return false;
    b->bin_next = bin->head;
    bin->head = b;
    ++bin->count;
    ++blocks_;
    mark(b->size, true);
    b->state = BlockState::BINNED;
    return true;
  }
  // How many more blocks of `size` its bin keeps under cap (0: none, or no
  // bin for the size).
  uint32_t room(size_t size, uint32_t cap) {
    Bin* bin = find_or_add(size);
    return bin == nullptr || bin->count >= cap ? 0 : cap - bin->count;
  }
  // n blocks of `size` (n <= room), linked newest first from head to tail
  // through bin_next and already BINNED, binned in one step: the bin as n
  // puts of tail .. head leave it (a red-zone batch comes back at once).
  void put_chain(size_t size, Block* head, Block* tail, uint32_t n) {
    Bin* bin = find(size);
    tail->bin_next = bin->head;
    bin->head = head;
    bin->count += n;
    blocks_ += n;
    mark(size, true);
  }
  bool empty() const { return blocks_ == 0; }
  // Hands every binned block to f (its state still BINNED) and empties the
  // bins.
  template <class F>
  void drain(F&& f) {
    if (blocks_ == 0) return;
    auto empty_bin = [&](Bin& bin) {
      for (Block* b = bin.head; b != nullptr;) {
        Block* next = b->bin_next;
        b->bin_next = nullptr;
        f(b);
        b = next;
      }
      bin = Bin{};
    };
    for (size_t w = 0; w < kWords; ++w) {
      for (uint64_t bits = used_[w]; bits != 0; bits &= bits - 1) {
        empty_bin(small_[w * 64 + static_cast<size_t>(__builtin_ctzll(bits))]);
      }
      used_[w] = 0;
    }
    for (LargeBin& l : large_) {
      empty_bin(l.bin);
      l.size = 0;
    }
    blocks_ = 0;
  }
  // The largest binned block, 0 when none.
  size_t largest() const {
    size_t best = 0;
    for (const LargeBin& l : large_)
      if (l.bin.head != nullptr && l.size > best) best = l.size;
    if (best != 0) return best;
    for (size_t w = kWords; w-- > 0;) {
      if (used_[w] != 0) {
        const size_t i = w * 64 + 63 - static_cast<size_t>(__builtin_clzll(used_[w]));
        return (i + 1) * kGranularity;
      }
    }
    return 0;
  }

 private:
  struct Bin {
    Block* head = nullptr;
    uint32_t count = 0;
  };
  struct LargeBin {
    size_t size = 0;  // 0: unused
    Bin bin;
  };
  static constexpr size_t kSmallBins = kSmallLimit / kGranularity;  // 512 B .. 1 MiB
  static constexpr size_t kLargeBins = 8;
  static constexpr size_t kWords = (kSmallBins + 63) / 64;

  // Keeps used_ in step with the emptiness of the small bin of `size`
  // (a large size has no bit: its bins are few and read directly).
  void mark(size_t size, bool used) {
    if (size > kSmallLimit) return;
    const size_t i = size / kGranularity - 1;  // find()'s index
    const uint64_t bit = uint64_t{1} << (i % 64);
    if (used) {
      used_[i / 64] |= bit;
    } else {
      used_[i / 64] &= ~bit;
    }
  }

  Bin* find(size_t size) {
    if (size <= kSmallLimit) return &small_[size / kGranularity - 1];
    for (LargeBin& l : large_)
      if (l.size == size) return &l.bin;
    return nullptr;
  }
  Bin* find_or_add(size_t size) {
    if (Bin* b = find(size)) return b;
    for (LargeBin& l : large_) {
      if (l.bin.head == nullptr) {  // unused or emptied: take it over
        l.size = size;
        l.bin = Bin{};
        return &l.bin;
      }
    }
    return nullptr;
  }

  std::array<Bin, kSmallBins> small_{};
  std::array<LargeBin, kLargeBins> large_{};
  std::array<uint64_t, kWords> used_{};  // bit i: small_[i] holds a block
  size_t blocks_ = 0;
};

}  // namespace metrale::core::pool
