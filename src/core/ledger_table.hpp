// The ledger's table of live entries: pointer -> LedgerEntry, open
// addressing with linear probing in one flat array, so a record is a hash
// (one multiply), a probe of usually one slot and a store in place, and a
// forget is the same probe and a backward shift of the run that follows.
//
// Why not std::unordered_map: every pooled alloc+free pair inserted and
// erased one node (allocator round trip, bucket links, a modulo by a prime
// per hash), about 160 of the pair's ~900 instructions. Here it is ~40.
//
// The interface is the subset of std::unordered_map the ledger uses (find,
// end, try_emplace, operator[], erase(iterator), iteration, size, reserve),
// with slots holding .first and .second, so the ledger's code reads the
// same. Differences that matter: an insert may move every entry (growth),
// and erase moves entries of the same probe run, so iterators and
// references are valid only until the next insert or erase. Keys are device
// pointers; kEmpty (all ones, never an aligned allocation) marks a free slot.
//
// Not thread-safe: the ledger's lock guards it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <memory>
#include <type_traits>
#include <utility>

namespace metrale::core {

template <class V>
class LedgerTable {
 public:
  using Key = uint64_t;
  static constexpr Key kEmpty = ~Key{0};
  struct Slot {
    Key first = kEmpty;
    V second{};
    operator std::pair<Key, V>() const { return {first, second}; }
  };

  template <class S>
  class Iter {
   public:
    using iterator_category = std::forward_iterator_tag;
    using value_type = std::remove_const_t<S>;
    using difference_type = std::ptrdiff_t;
    using pointer = S*;
    using reference = S&;
    Iter(S* p, S* end) : p_(p), end_(end) { skip(); }
    S& operator*() const { return *p_; }
    S* operator->() const { return p_; }
    Iter& operator++() {
      ++p_;
      skip();
      return *this;
    }
    bool operator==(const Iter& o) const { return p_ == o.p_; }
    bool operator!=(const Iter& o) const { return p_ != o.p_; }
    S* slot() const { return p_; }

   private:
    void skip() {
      while (p_ != end_ && p_->first == kEmpty) ++p_;
    }
    S* p_;
    S* end_;
  };
  using iterator = Iter<Slot>;
  using const_iterator = Iter<const Slot>;
  // For std::vector::assign and the like.
  using value_type = Slot;

  LedgerTable() = default;
  LedgerTable(const LedgerTable&) = delete;
  LedgerTable& operator=(const LedgerTable&) = delete;

  size_t size() const { return size_; }
  // How many entries fit before an insert grows the table.
  size_t room() const { return max_load(); }
  bool empty() const { return size_ == 0; }

  iterator begin() { return iterator(slots_.get(), slots_.get() + cap_); }
  iterator end() { return iterator(slots_.get() + cap_, slots_.get() + cap_); }
  const_iterator begin() const { return const_iterator(slots_.get(), slots_.get() + cap_); }
  const_iterator end() const {
    return const_iterator(slots_.get() + cap_, slots_.get() + cap_);
  }

  // Room for n entries without growing (may throw bad_alloc; then nothing
  // changed).
  void reserve(size_t n) {
    if (n > max_load()) grow_to(n);
  }

  iterator find(Key k) {
    Slot* s = lookup(k);
    return s != nullptr ? iterator(s, slots_.get() + cap_) : end();
  }
  const_iterator find(Key k) const {
    const Slot* s = const_cast<LedgerTable*>(this)->lookup(k);
    return s != nullptr ? const_iterator(s, slots_.get() + cap_) : end();
  }
  // The value of k, or nullptr: the ledger's hot path.
  V* get(Key k) {
    Slot* s = lookup(k);
    return s != nullptr ? &s->second : nullptr;
  }

  // Inserts (k, v) unless k is present; the second member says which.
  std::pair<iterator, bool> try_emplace(Key k, const V& v) {
    if (Slot* s = lookup(k)) return {iterator(s, slots_.get() + cap_), false};
    reserve(size_ + 1);
    Slot* s = place(k);
    s->second = v;
    return {iterator(s, slots_.get() + cap_), true};
  }
  // The value of k, its slot taken when absent (the value then holds
  // whatever it held before: the caller sets it); room for one more entry
  // must be reserved. One probe, cannot throw.
  V* upsert_reserved(Key k) noexcept {
    const size_t mask = cap_ - 1;
    size_t i = home(k);
    for (; slots_[i].first != kEmpty; i = (i + 1) & mask) {
      if (slots_[i].first == k) return &slots_[i].second;
    }
    slots_[i].first = k;
    ++size_;
    return &slots_[i].second;
  }
  V& operator[](Key k) {
    if (Slot* s = lookup(k)) return s->second;
    reserve(size_ + 1);
    Slot* s = place(k);
    s->second = V{};
    return s->second;
  }

  void erase(iterator it) { erase_slot(it.slot()); }
  void erase(const_iterator it) { erase_slot(const_cast<Slot*>(it.slot())); }
  // Erases the entry whose value v is (a pointer get() returned).
  void erase_value(V* v) {
    erase_slot(reinterpret_cast<Slot*>(reinterpret_cast<char*>(v) - offsetof(Slot, second)));
  }

 private:
  size_t max_load() const { return cap_ - cap_ / 4; }  // 75 %
  size_t home(Key k) const {
    return static_cast<size_t>((k * 0x9e3779b97f4a7c15ull) >> shift_);
  }

  Slot* lookup(Key k) {
    if (cap_ == 0) return nullptr;
    const size_t mask = cap_ - 1;
    for (size_t i = home(k);; i = (i + 1) & mask) {
      Slot* s = &slots_[i];
      // Empty first: a caller's key may be kEmpty itself (a freed or made-up
      // pointer of all ones), which must not match a free slot.
      if (s->first == kEmpty) return nullptr;
      if (s->first == k) return s;
    }
  }
  // The free slot for k (absent, room reserved), now holding k.
  Slot* place(Key k) noexcept {
    const size_t mask = cap_ - 1;
    size_t i = home(k);
    while (slots_[i].first != kEmpty) i = (i + 1) & mask;
    slots_[i].first = k;
    ++size_;
    return &slots_[i];
  }
  // Backward-shift deletion: the entries after the hole that would no
  // longer be found past it move into it, so no tombstones build up.
  void erase_slot(Slot* s) noexcept {
    const size_t mask = cap_ - 1;
    size_t hole = static_cast<size_t>(s - slots_.get());
    for (size_t i = (hole + 1) & mask;; i = (i + 1) & mask) {
      Slot& n = slots_[i];
      if (n.first == kEmpty) break;
      const size_t want = home(n.first);
      // n may move into the hole when the hole lies in [want, i) cyclically.
      if (((i - want) & mask) >= ((i - hole) & mask)) {
        slots_[hole] = n;
        hole = i;
      }
    }
    slots_[hole].first = kEmpty;
    --size_;
  }
  void grow_to(size_t n) {
    size_t cap = cap_ != 0 ? cap_ : 16;
    unsigned bits = cap_ != 0 ? 64 - shift_ : 4;
    while (n > cap - cap / 4) {
      cap *= 2;
      ++bits;
    }
    std::unique_ptr<Slot[]> fresh(new Slot[cap]);  // may throw: nothing changed
    std::unique_ptr<Slot[]> old = std::move(slots_);
    const size_t old_cap = cap_;
    slots_ = std::move(fresh);
    cap_ = cap;
    shift_ = 64 - bits;
    size_ = 0;
    for (size_t i = 0; i < old_cap; ++i) {
      if (old[i].first != kEmpty) place(old[i].first)->second = old[i].second;
    }
  }

  std::unique_ptr<Slot[]> slots_;
  size_t cap_ = 0;  // a power of two, or 0
  unsigned shift_ = 64;
  size_t size_ = 0;
};

}  // namespace metrale::core
