#include "core/pad_mirror.hpp"

namespace metrale::core {
namespace {

// The mirror this thread holds, if any: a scan started from a log callback
// further down the same thread must not try to lock it again.
thread_local const PadMirror* t_held = nullptr;

}  // namespace

PadMirror::Lease::Lease(PadMirror& m) : m_(m) {
  if (t_held == &m) return;
  held_ = m.mutex_.try_lock();
  if (held_) t_held = &m;
}

PadMirror::Lease::~Lease() {
  if (!held_) return;
  t_held = nullptr;
  m_.mutex_.unlock();
}

void PadMirror::refresh(Ledger& ledger) {
  const bool rebuild = !valid_;
  valid_ = false;  // until the changes are applied
  ledger.pad_changes(rebuild, &changes_);
  if (changes_.whole) {
    ranges_.swap(changes_.ranges);
    owners_.swap(changes_.owners);
    // Not kept for the next time: a whole copy is rare, and holding the old
    // arrays would double the memory the mirror keeps.
    std::vector<backend::Range>().swap(changes_.ranges);
    std::vector<PadOwner>().swap(changes_.owners);
  } else {
    ranges_.resize(changes_.size);
    owners_.resize(changes_.size);
    for (size_t i = 0; i < changes_.slots.size(); ++i) {
      ranges_[changes_.slots[i]] = changes_.ranges[i];
      owners_[changes_.slots[i]] = changes_.owners[i];
    }
  }
  valid_ = true;
  send_whole_ = changes_.whole || !backend_synced_;
}

}  // namespace metrale::core
