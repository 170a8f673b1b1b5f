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
                                 StreamHandle on, const char* file, int line) {
  DeferredFree d{ptr, e, on, on};
  if (file != nullptr) {
    // The caller's text may not outlive the call: the ledger's copy.
    const uint32_t site = ledger_.intern_site(file, line);
    d.free_file = ledger_.site_file(site);
    d.free_line = ledger_.site_line(site);
  }
  std::lock_guard<std::mutex> lock(deferred_mutex_);
  deferred_.push_back(d);
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
  // One entry at a time, taken out in place: a list of them would be an
  // allocation here, where nothing may throw (the capture is over).
  uint64_t round = 0;
  {
    std::lock_guard<std::mutex> lock(deferred_mutex_);
    round = ++deferred_round_;
  }
  const auto due = [&](const DeferredFree& d) {
    return d.retry ? d.retry_round != round : (h != 0 && d.until == h);
  };
  for (;;) {
    DeferredFree d{};
    {
      std::lock_guard<std::mutex> lock(deferred_mutex_);
      size_t i = 0;
      while (i < deferred_.size() && !due(deferred_[i])) ++i;
      if (i == deferred_.size()) return;
      d = deferred_[i];
      deferred_[i] = deferred_.back();
      deferred_.pop_back();
    }
    try {
      // Marked (record_stream) on another stream that is still capturing:
      // freeing now would be CAPTURE and lose the block. It waits for that
      // capture instead (never this one again: its until is `busy`).
      // Checked and queued under one lock: that capture's own release
      // (note_capture_closed) closes it first and takes this lock after,
      // so it either finds the entry or the check sees it closed.
      if (d.entry.block != nullptr) {
        std::lock_guard<std::mutex> lock(deferred_mutex_);
        const StreamHandle busy = capturing_user_held(d.entry, d.stream);
        if (busy != 0 && busy != h) {
          d.until = busy;
          d.retry = false;
          deferred_.push_back(d);  // the room this entry left
          continue;
        }
      }
      release_memory(d.ptr, d.entry, d.stream, d.free_file, d.free_line);
    } catch (const std::exception& ex) {
      requeue_deferred(d, round, ex.what());
    } catch (...) {
      requeue_deferred(d, round, "unknown error");
    }
  }
}

// A release that failed (short of memory for the free's event): the block
// stays the free's, kept for the next release_deferred, not lost.
void metrale_context::requeue_deferred(DeferredFree d, uint64_t round, const char* why) noexcept {
  if (!d.retry) {
    metrale::core::log().warn("freeing {} after its capture closed failed ({}); tried again at "
                              "the next capture end or pool trim",
                              hex(d.ptr), why);
  }
  d.retry = true;
  d.retry_round = round;
  d.until = 0;
  try {
    std::lock_guard<std::mutex> lock(deferred_mutex_);
    deferred_.push_back(d);  // the room this entry left, unless another took it
  } catch (...) {
    metrale::core::log().warn("freeing {} after its capture closed failed, and its memory "
                              "stays unusable until the context is destroyed",
                              hex(d.ptr));
  }
}

metrale_context::StreamHandle metrale_context::capturing_user_held(
    const metrale::core::LedgerEntry& e, StreamHandle on) {
  // The stream the free happens on (its own when none), then the streams
  // marked with record_stream.
  const StreamHandle free_on = on != 0 ? on : pool_->block_stream(e.block);
  if (device([&] { return backend_->stream_is_capturing(free_on); })) return free_on;
  return pool_->capturing_use_of(e.block);
}

bool metrale_context::defer_while_captured(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                           const char* file) {
  if (e.block == nullptr || captures_open_.load(std::memory_order_acquire) == 0) return false;
  // Checked and queued under one lock, as in release_deferred.
  std::lock_guard<std::mutex> lock(deferred_mutex_);
  const StreamHandle busy = capturing_user_held(e, 0);
  if (busy == 0) return false;
  deferred_.push_back(DeferredFree{ptr, e, 0, busy, file, 0});
  return true;
}
