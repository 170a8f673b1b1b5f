// The harness's own account of what the library should hold: live ledger
// allocations with a shadow of their bytes and the state of their red-zone
// pads, arenas, pinned blocks, handles. The fuzz driver compares the
// library's answers against it after every call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "metrale_gpu.h"

namespace fuzz {

// Fails the run with a reason libFuzzer will save the input for.
[[noreturn]] inline void violated(const char* what, const char* detail, metrale_status_t got) {
  std::fprintf(stderr, "\nINVARIANT VIOLATED: %s (%s): status %s, message \"%s\"\n", what, detail,
               metrale_status_name(got), metrale_last_error_message());
  std::abort();
}

// Reads the fuzzer's bytes; zeros once they run out.
class Bytes {
 public:
  Bytes(const uint8_t* data, size_t size) : data_(data), size_(size) {}
  bool empty() const { return pos_ >= size_; }
  uint8_t u8() { return pos_ < size_ ? data_[pos_++] : 0; }
  uint16_t u16() { return static_cast<uint16_t>(u8() | (u8() << 8)); }
  uint32_t u32() { return static_cast<uint32_t>(u16()) | (static_cast<uint32_t>(u16()) << 16); }
  uint64_t u64() { return static_cast<uint64_t>(u32()) | (static_cast<uint64_t>(u32()) << 32); }
  // A value in [0, n), n > 0.
  size_t pick(size_t n) { return n <= 256 ? u8() % n : u32() % n; }

 private:
  const uint8_t* data_;
  size_t size_;
  size_t pos_ = 0;
};

enum class Pad { Clean, Dirty, Unknown };

struct Alloc {
  metrale_devptr_t ptr = 0;
  size_t bytes = 0;
  size_t pad = 0;        // red-zone bytes after the buffer
  uint64_t seq = 0;
  bool ledger = true;    // false for arenas
  metrale_alloc_kind_t kind = METRALE_ALLOC_DEVICE;
  Pad pad_state = Pad::Clean;
  // A scan listed this pad (the free's red-zone check then stays quiet about
  // it); Maybe: a scan found more than it listed.
  Pad scan_reported = Pad::Clean;  // Clean: no, Dirty: yes, Unknown: maybe
  std::vector<uint8_t> shadow;  // the bytes the harness believes are there
  std::vector<uint8_t> known;   // 1 where shadow is certain
  // Streams record_stream marked it on (pooled contexts): while one of them
  // captures, a free may be CAPTURE with nothing freed.
  std::vector<metrale_stream_t*> marked;

  bool contains(uint64_t p, uint64_t n) const {
    return p >= ptr && p - ptr <= bytes && n <= bytes - (p - ptr);
  }
  // The block the backend reserved: buffer, pad and rounding (256 bytes).
  size_t reserved() const { return ((bytes + pad) + 255) & ~static_cast<size_t>(255); }
  bool within_reserved(uint64_t p, uint64_t n) const {
    return p >= ptr && p - ptr <= reserved() && n <= reserved() - (p - ptr);
  }
  void forget(uint64_t p, uint64_t n) {
    if (n == 0 || !contains(p, n)) return;
    std::memset(known.data() + (p - ptr), 0, n);
  }
  void write(uint64_t p, const uint8_t* src, uint64_t n) {
    if (n == 0) return;
    std::memcpy(shadow.data() + (p - ptr), src, n);
    std::memset(known.data() + (p - ptr), 1, n);
  }
  void fill(uint64_t p, uint8_t v, uint64_t n) {
    if (n == 0) return;
    std::memset(shadow.data() + (p - ptr), v, n);
    std::memset(known.data() + (p - ptr), 1, n);
  }
  // A write that the backend accepted over [p, p+n) may have reached the pad.
  void touched_beyond(uint64_t p, uint64_t n) {
    if (pad == 0) return;
    uint64_t end = p + n;
    if (end > ptr + bytes && p < ptr + bytes + pad) pad_state = Pad::Unknown;
  }
};

struct Pinned {
  void* ptr = nullptr;
  size_t bytes = 0;
};

// Where a device range lies, as far as the harness knows.
enum class Where {
  Inside,    // inside one live allocation's buffer (ledger, managed or arena)
  Pinned,    // inside pinned or registered host memory
  Slack,     // inside a backend block but past the buffer (pad, rounding)
  Outside,   // in no block the backend made
};

// A padded pooled allocation freed with a pad that may be overwritten: the
// batch check of freed pads (include/metrale_gpu.h, "Freed pads") reports it
// at the next scan. required: the pad was known dirty and no scan listed it.
struct FreedPad {
  metrale_devptr_t ptr = 0;
  uint64_t seq = 0;
  size_t bytes = 0;
  size_t pad = 0;
  bool required = false;
};

struct Model {
  std::vector<Alloc> allocs;  // ledger ones in seq order, then arenas mixed in
  std::vector<FreedPad> freed_pads;
  std::vector<Pinned> pinned;
  std::vector<metrale_devptr_t> freed;  // pointers that were live once
  uint8_t* registered = nullptr;        // the registered static range, or NULL
  size_t registered_bytes = 0;
  bool checked = false;
  // metrale_alloc serves from the caching pool, and freed pinned blocks stay
  // in the pinned cache: freed memory, the rest of a chunk and cached pinned
  // blocks stay mapped, so the host backend cannot refuse a range there.
  bool pooled = true;
  bool lost = false;
  // A write into pool memory no allocation owned was accepted: it may have
  // hit a freed block's pad (reported by the check of freed pads) or a
  // pattern range a later allocation reuses without a fill.
  bool stray = false;

  // A ledger allocation leaves (free, free_async, sweep).
  void note_freed(const Alloc& a) {
    if (!pooled || !a.ledger || a.pad == 0 || a.kind != METRALE_ALLOC_DEVICE) return;
    if (a.scan_reported == Pad::Dirty) return;
    // Clean ones too: a graph replay or a write into pool memory may reach
    // the pad while the block waits for its check (optional then).
    FreedPad f;
    f.ptr = a.ptr;
    f.seq = a.seq;
    f.bytes = a.bytes;
    f.pad = a.pad;
    f.required = a.pad_state == Pad::Dirty && a.scan_reported == Pad::Clean;
    freed_pads.push_back(f);
  }
  size_t live_count() const {
    size_t n = 0;
    for (const Alloc& a : allocs) n += a.ledger;
    return n;
  }
  size_t live_bytes() const {
    size_t n = 0;
    for (const Alloc& a : allocs)
      if (a.ledger) n += a.bytes;
    return n;
  }
  Alloc* find_inside(uint64_t p, uint64_t n) {
    for (Alloc& a : allocs)
      if (a.contains(p, n)) return &a;
    return nullptr;
  }
  // The allocation that starts at p. Not find_inside(p, 0): where two
  // blocks touch, p is also the end of the one before, which contains it.
  Alloc* find_at(uint64_t p) {
    for (Alloc& a : allocs)
      if (a.ptr == p) return &a;
    return nullptr;
  }
  Alloc* find_block(uint64_t p, uint64_t n) {
    for (Alloc& a : allocs)
      if (a.within_reserved(p, n)) return &a;
    return nullptr;
  }
  Where where(uint64_t p, uint64_t n) {
    if (p + n < p) return Where::Outside;
    if (find_inside(p, n)) return Where::Inside;
    for (const Pinned& h : pinned) {
      auto b = reinterpret_cast<uint64_t>(h.ptr);
      size_t r = (h.bytes + 255) & ~static_cast<size_t>(255);
      if (p >= b && p - b <= r && n <= r - (p - b)) return Where::Pinned;
    }
    if (registered) {
      auto b = reinterpret_cast<uint64_t>(registered);
      if (p >= b && p - b <= registered_bytes && n <= registered_bytes - (p - b))
        return Where::Pinned;
    }
    if (find_block(p, n)) return Where::Slack;
    // A range overlapping a block without fitting in it is refused as well.
    return Where::Outside;
  }
};

}  // namespace fuzz
