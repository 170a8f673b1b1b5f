// Keeps red-zone pads readable while a scan or poison pass works on them.
//
// A pass takes a snapshot of the pads from the ledger and then reads (or
// writes) them with device work, holding no lock. A free landing meanwhile
// takes its entry off the ledger at once (counters and queries stay exact),
// but the memory itself is held back until every pass that was open at the
// time of the free has closed. So a pass never touches freed memory (on the
// host backend that would be a use after free, on cuda an illegal address),
// and no new allocation can take the address of a pad the pass still looks
// at, which would let it be blamed for the old allocation's bytes.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <set>
#include <vector>

namespace metrale::core {

class ScanFence {
 public:
  using DevPtr = uint64_t;
  // What a free held back: the address and, for a pooled block, the block
  // (nullptr: a driver allocation).
  struct Released {
    DevPtr ptr;
    void* block;
  };

  // Opens a pass; call it before taking the pad snapshot. Returns its id.
  uint64_t enter();
  // Closes pass `id`; returns the held blocks no open pass can still see,
  // which the caller now frees (backend or pool).
  std::vector<Released> leave(uint64_t id);
  // Called by a free after the ledger entry is gone: true when a pass is
  // open, and then the block is held (the caller must not free it now).
  bool hold(DevPtr ptr, void* block);
  // Whether a pass is open now (a free after this call that sees false
  // needs no hold: a pass opened later never had its pad in its snapshot).
  bool any_open();
  // Every held block, for context teardown.
  std::vector<Released> drain();

 private:
  struct Held {
    Released what;
    uint64_t first_unseen;  // passes with an id below this were open at the free
  };
  std::mutex mutex_;
  uint64_t next_id_ = 0;
  std::set<uint64_t> open_;
  std::deque<Held> held_;  // first_unseen never decreases from front to back
};

// Opens a pass for the lifetime of the object; on exit frees (through
// `release`, a callable taking the vector) what the pass held back.
template <class Release>
class ScanPass {
 public:
  ScanPass(ScanFence& fence, Release release)
      : fence_(fence), release_(release), id_(fence.enter()) {}
  ~ScanPass() { release_(fence_.leave(id_)); }
  ScanPass(const ScanPass&) = delete;
  ScanPass& operator=(const ScanPass&) = delete;

 private:
  ScanFence& fence_;
  Release release_;
  uint64_t id_;
};

}  // namespace metrale::core
