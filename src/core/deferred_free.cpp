// Frees that wait for a capture to close (rule 9): a pooled block freed on
// a capturing stream, or one marked (record_stream) on another stream that
// still captures when its freeing stream's capture closes. The entry has
// left the ledger at the free; the block goes back to the pool here.
#include <mutex>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"

using metrale::core::hex;

void metrale_context::defer_free(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                 StreamHandle on) {
  std::lock_guard<std::mutex> lock(deferred_mutex_);
  deferred_.push_back(DeferredFree{ptr, e, on, on});
}

void metrale_context::retarget_deferred(StreamHandle gone) {
  std::lock_guard<std::mutex> lock(deferred_mutex_);
  for (DeferredFree& d : deferred_) {
    if (d.stream != gone || d.until == gone) continue;
    // Freed on `gone` but waiting for another capture: the pool's
    // retirement of `gone` waits for its work once the block is marked used
    // on it, and the free later happens on the block's own stream.
    if (d.entry.block != nullptr) pool_->record_stream(d.entry.block, gone);
    d.stream = 0;
  }
}

void metrale_context::release_deferred(StreamHandle h) noexcept {
  std::vector<DeferredFree> mine;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex_);
    for (size_t i = 0; i < deferred_.size();) {
      if (deferred_[i].until == h) {
        mine.push_back(deferred_[i]);
        deferred_[i] = deferred_.back();
        deferred_.pop_back();
      } else {
        ++i;
      }
    }
  }
  for (DeferredFree& d : mine) {
    try {
      // Marked (record_stream) on another stream that is still capturing:
      // freeing now would be CAPTURE and lose the block. It waits for that
      // capture instead. Checked and queued under one lock: that capture's
      // own release (note_capture_closed) closes it first and takes this
      // lock after, so it either finds the entry or the check sees it closed.
      if (d.entry.block != nullptr) {
        std::lock_guard<std::mutex> lock(deferred_mutex_);
        const StreamHandle busy = pool_->capturing_use_of(d.entry.block);
        if (busy != 0 && busy != h) {
          d.until = busy;
          deferred_.push_back(d);
          continue;
        }
      }
      release_memory(d.ptr, d.entry, d.stream);
    } catch (const std::exception& ex) {
      metrale::core::log().debug("freeing {} after its capture closed failed: {}", hex(d.ptr),
                                 ex.what());
    } catch (...) {
      metrale::core::log().debug("freeing {} after its capture closed failed", hex(d.ptr));
    }
  }
}
