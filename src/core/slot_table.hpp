// The objects of one handle kind (a context's streams, its events, ..., or
// the process's contexts), each in a slot named by a handle value (see
// handle_id.hpp). A live slot holds the serial its handle was issued with;
// destroy sets it to 0. A lookup is a bounds check and one acquire load of
// that serial: a destroyed handle, another table's handle or a forged value
// finds no match, and nothing it names is ever read.
//
// Slots never move and are not freed while the table lives (chunks of
// growing size, 16, 32, 64, ... slots, allocated once). A dead slot is
// reused for a new object under a new serial, oldest first and only once
// kQuarantine others have died after it, so a lookup racing with a destroy
// (a race in the caller) still reads the object it looked up.
#pragma once

#include <atomic>
#include <cstdint>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <utility>
#include <vector>

#include "backend/error.hpp"
#include "core/handle_id.hpp"

namespace metrale::core {

template <class T>
class SlotTable {
 public:
  static constexpr size_t kQuarantine = 64;
  static constexpr uint32_t kMaxSlots = uint32_t{1} << handle_id::kSlotBits;

  explicit SlotTable(const char* kind) : kind_(kind) {
    for (auto& c : chunks_) c.store(nullptr, std::memory_order_relaxed);
  }
  ~SlotTable() {
    for (auto& c : chunks_) delete[] c.load(std::memory_order_relaxed);
  }
  SlotTable(const SlotTable&) = delete;
  SlotTable& operator=(const SlotTable&) = delete;

  // A slot taken ahead of its object, for a call that must know it can
  // publish before it acts (rule 1: graph_end_capture takes its slot before
  // the backend ends the capture). insert(Reserved, fill) publishes it
  // without allocating; a reservation dropped unused gives the slot back.
  class Reserved {
   public:
    Reserved(Reserved&& o) noexcept : table_(o.table_), index_(o.index_), serial_(o.serial_) {
      o.table_ = nullptr;
    }
    Reserved(const Reserved&) = delete;
    Reserved& operator=(const Reserved&) = delete;
    Reserved& operator=(Reserved&&) = delete;
    ~Reserved() {
      if (table_ != nullptr) table_->give_back(index_);
    }

   private:
    friend class SlotTable;
    Reserved(SlotTable* t, uint32_t i, uint64_t serial) noexcept
        : table_(t), index_(i), serial_(serial) {}
    SlotTable* table_;
    uint32_t index_;
    uint64_t serial_;
  };

  // OUT_OF_MEMORY when 2^20 objects are live or the serials are spent, or
  // when the slot's chunk cannot be allocated.
  Reserved reserve() {
    const uint64_t serial = handle_id::next_serial();
    std::lock_guard<std::mutex> lock(mutex_);
    return Reserved(this, take_slot_locked(), serial);
  }

  // A new live object: fill(T&) sets up a freshly constructed T, then the
  // slot is published under a new serial. Returns the handle value.
  // OUT_OF_MEMORY as reserve(); what fill throws, with the slot given back.
  template <class Fill>
  uint64_t insert(Fill&& fill) {
    return insert(reserve(), std::forward<Fill>(fill));
  }

  // The same in a reserved slot: allocates nothing, throws only what fill
  // throws.
  template <class Fill>
  uint64_t insert(Reserved&& r, Fill&& fill) {
    Reserved held(std::move(r));
    Slot& s = slot_at(held.index_);
    s.obj.~T();
    new (&s.obj) T();
    fill(s.obj);
    held.table_ = nullptr;  // published: the slot is the object's
    s.serial.store(held.serial_, std::memory_order_release);
    return handle_id::encode(held.index_, held.serial_);
  }

  // The live object of a handle value, or nullptr. Lock-free, a few
  // instructions: it sits on the launch path.
  T* find(uint64_t v) const noexcept {
    Slot* s = live_slot(v);
    return s != nullptr ? &s->obj : nullptr;
  }

  // find() that also returns the slot's serial word: the object stays the
  // live one of v for as long as *serial == handle_id::serial_of(v) (slots
  // never move or go away while the table lives), so a caller may cache the
  // lookup and confirm it later with one load.
  T* find_cached(uint64_t v, const std::atomic<uint64_t>** serial) const noexcept {
    Slot* s = live_slot(v);
    if (s == nullptr) return nullptr;
    *serial = &s->serial;
    return &s->obj;
  }

  // Kills a handle: false when v is not live here (never was, destroyed
  // already, or another table's). Exactly one of two racing erases wins.
  // last(T&) runs after the kill and before the slot may be reused.
  template <class Last>
  bool erase(uint64_t v, Last&& last) {
    Slot* s = live_slot(v);
    if (s == nullptr) return false;
    uint64_t expected = handle_id::serial_of(v);
    if (!s->serial.compare_exchange_strong(expected, 0, std::memory_order_acq_rel)) return false;
    struct Recycle {
      SlotTable* t;
      uint32_t index;
      ~Recycle() { t->give_back(index); }
    } recycle{this, handle_id::slot_of(v)};
    last(s->obj);
    return true;
  }

  // Every live object, in slot order (teardown, scans).
  std::vector<T*> live() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<T*> out;
    for (uint32_t i = 0; i < used_; ++i) {
      Slot& s = slot_at(i);
      if (s.serial.load(std::memory_order_acquire) != 0) out.push_back(&s.obj);
    }
    return out;
  }

  // The slot's object whatever its state, or nullptr when the value names
  // no allocated slot: for diagnostics on the cold path only.
  T* any_slot(uint64_t v) const noexcept {
    if (!handle_id::well_formed(v)) return nullptr;
    Loc l = locate(handle_id::slot_of(v));
    Slot* chunk = chunks_[l.chunk].load(std::memory_order_acquire);
    return chunk != nullptr ? &chunk[l.offset].obj : nullptr;
  }

  // fork(): the prepare handler holds the table across the fork; the
  // parent releases it; the child kills every live slot (on_killed(T&,
  // serial) first) and never reuses those slots.
  void fork_prepare() { mutex_.lock(); }
  void fork_parent() { mutex_.unlock(); }
  template <class F>
  void fork_child(F&& on_killed) {
    for (uint32_t i = 0; i < used_; ++i) {
      Slot& s = slot_at(i);
      uint64_t serial = s.serial.load(std::memory_order_relaxed);
      if (serial == 0) continue;
      on_killed(s.obj, serial);
      s.serial.store(0, std::memory_order_release);
    }
    mutex_.unlock();
  }

 private:
  // A line each: the serial a lookup checks and the object's first fields
  // (a kernel's stale flag and function, a stream's backend handle) come in
  // one cache line, where 88-byte kernel slots straddled two.
  struct alignas(64) Slot {
    std::atomic<uint64_t> serial{0};  // 0: dead or never used
    T obj;
  };
  // Chunk c holds 2^(c + kFirstBits) slots; together they cover kMaxSlots.
  static constexpr unsigned kFirstBits = 4;
  static constexpr unsigned kChunks = handle_id::kSlotBits - kFirstBits + 1;
  struct Loc {
    unsigned chunk;
    uint64_t offset;
  };
  static Loc locate(uint32_t index) noexcept {
    const uint64_t i = uint64_t{index} + (uint64_t{1} << kFirstBits);
    const unsigned top = 63u - static_cast<unsigned>(__builtin_clzll(i));
    return {top - kFirstBits, i - (uint64_t{1} << top)};
  }

  Slot* live_slot(uint64_t v) const noexcept {
    const uint64_t serial = handle_id::serial_of(v);
    if (!handle_id::well_formed(v) || serial == 0) return nullptr;
    const uint32_t index = handle_id::slot_of(v);
    // The first chunk without locate()'s arithmetic: a process rarely holds
    // more than 16 contexts, and every API call looks its context up.
    Loc l = __builtin_expect(index < (uint32_t{1} << kFirstBits), 1) ? Loc{0, index}
                                                                     : locate(index);
    Slot* chunk = chunks_[l.chunk].load(std::memory_order_acquire);
    if (chunk == nullptr) return nullptr;
    Slot* s = &chunk[l.offset];
    return s->serial.load(std::memory_order_acquire) == serial ? s : nullptr;
  }

  Slot& slot_at(uint32_t index) const noexcept {
    Loc l = locate(index);
    return chunks_[l.chunk].load(std::memory_order_acquire)[l.offset];
  }

  uint32_t take_slot_locked() {
    if (free_.size() > kQuarantine) return pop_free_locked();
    if (used_ < kMaxSlots) {
      Loc l = locate(used_);
      if (l.offset == 0) {
        chunks_[l.chunk].store(new Slot[uint64_t{1} << (l.chunk + kFirstBits)],
                               std::memory_order_release);
      }
      return used_++;
    }
    if (!free_.empty()) return pop_free_locked();
    fail(METRALE_ERROR_OUT_OF_MEMORY, std::string("too many live ") + kind_ + "s (" +
                                          std::to_string(kMaxSlots) + "); destroy some first");
  }
  void give_back(uint32_t index) noexcept {
    try {
      std::lock_guard<std::mutex> lock(mutex_);
      free_.push_back(index);
    } catch (...) {
      // No memory for the free list: the slot stays dead, unused.
    }
  }

  uint32_t pop_free_locked() {
    uint32_t index = free_.front();
    free_.pop_front();
    return index;
  }

  const char* kind_;
  mutable std::mutex mutex_;
  std::atomic<Slot*> chunks_[kChunks];
  uint32_t used_ = 0;          // slots handed out at least once: [0, used_)
  std::deque<uint32_t> free_;  // dead slots, oldest first
};

}  // namespace metrale::core
