// Red zones on pooled blocks without a fill per allocation (see
// pad_verify_queue.hpp): the allocation side, which fills a block's tail only
// when the block does not already carry the pattern there, and the free
// side, which queues freed padded blocks and checks them in batches before
// the pool may hand them out again.
#include <algorithm>
#include <cstdio>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/tags.hpp"

using metrale::Error;
using metrale::backend::Range;
using metrale::core::PendingPad;
using metrale::core::pool::Block;
using metrale::core::pool::PatternRange;

namespace {

// This thread runs a pass: a log callback calling back in must not start
// another one (it would wait for the pass it is called from).
thread_local bool t_in_pass = false;

// Slack after a pad filled with it too (prepare_pooled_pad).
constexpr size_t kFillSlack = 4096;

}  // namespace

void metrale_context::prepare_pooled_pad(Block* b, size_t bytes, size_t pad,
                                         metrale::core::StreamObj* st, bool cap, bool wait) {
  const DevPtr ptr = b->ptr;
  // What the pool handed out: a range checked to hold the pattern since the
  // block's last use, with nothing handed out over it.
  const metrale::core::pool::PatternRange known = b->pattern;
  b->pattern = metrale::core::pool::PatternRange{};  // until a fill is issued
  if (known.covers(bytes, bytes + pad)) {
    // The new pad lies inside it: no fill, no wait. The caller's bytes
    // [0, bytes) are theirs now; the rest of the range stays ours.
    b->pattern = metrale::core::pool::PatternRange{bytes, known.to};
    pad_verify_.fills_skipped.fetch_add(1, std::memory_order_relaxed);
    return;
  }
  // The pad and up to kFillSlack bytes of the block's slack after it (the
  // pool rounds sizes), so that a later, somewhat larger allocation from
  // this block finds its pad inside the pattern too. Bounded: a block left
  // unsplit can be megabytes longer than asked, and each check reads what
  // was filled. While st captures, the pad only, filled at once (rule 3).
  const size_t to = cap ? bytes + pad : std::min(b->size, bytes + pad + kFillSlack);
  fill_pooled_pad(ptr + bytes, to - bytes, st, cap, wait);
  b->pattern = metrale::core::pool::PatternRange{bytes, to};
  pad_verify_.fills.fetch_add(1, std::memory_order_relaxed);
}

bool metrale_context::hold_for_verify(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                      StreamHandle on, const char* file, int line) {
  if (e.pad == 0 || e.block == nullptr || pool_ == nullptr) return false;
  // Allocated, off the ledger, ours: nobody else reads or writes the block
  // (its owners record is the ledger's lock's, as the list is).
  Block* b = e.block;
  const bool filled = b->pattern.from == e.bytes && b->pattern.covers(e.bytes, e.bytes + e.pad);
  bool run_pass = false;
  {
    std::lock_guard<metrale::core::FastMutex> lock(ledger_.mutex());
    const uint32_t free_site = ledger_.intern_site_held(file != nullptr ? file : "<unknown>", line);
    PendingPad& p = pad_verify_.emplace_held(ptr, e, free_site, on,
                                             filled ? b->pattern.to : e.bytes + e.pad,
                                             b->size);  // may throw: nothing queued
    // Owners that shared the pad unchecked (METRALE_REDZONE_REUSE), also
    // when this free came the long way (a sweep, a capture open, the
    // quarantine): the check names them.
    take_earlier_owners_held(b, &p);
    run_pass = pad_verify_.commit_held();
  }
  if (run_pass) verify_freed_pads(false);
  return true;
}

void metrale_context::verify_freed_pads(bool wait_for_other_pass) noexcept {
  if (pool_ == nullptr) return;
  // Set before trying the mutex, cleared by a holder before it takes the
  // list, looked at by every holder after letting go: a free that finds
  // the mutex held has its block taken by that holder's pass or by the
  // round it runs after (no blocking wait: host kernels and log callbacks
  // call back in while a pass runs).
  pass_wanted_.store(true);
  if (t_in_pass) return;  // a log callback of this thread's pass: it takes them
  // Checking waits for streams: never from inside a host kernel (it may be
  // the work waited for); the blocks wait for a pass running elsewhere or
  // the next one.
  if (backend_->in_stream_work(0)) return;
  std::unique_lock<std::mutex> serial(verify_mutex_, std::defer_lock);
  if (wait_for_other_pass) {
    serial.lock();
  } else if (!serial.try_lock()) {
    return;  // another thread holds it; it runs a round for these blocks
  }
  for (;;) {
    pass_wanted_.store(false);
    t_in_pass = true;
    std::vector<FreedPadReport> reports;
    try {
      // Earlier stream-ordered checks first: their findings come before this
      // pass's, and a scan (wait) sees every one of them.
      collect_ordered_checks(false, &reports);
      run_verify_pass(&reports);
      if (wait_for_other_pass) collect_ordered_checks(true, &reports);
    } catch (const std::exception& ex) {
      // Warn: the blocks went back to the pool unchecked, so an overrun of
      // theirs can no longer be reported; the user needs to know why.
      metrale::core::log().warn(
          "red-zone check of freed blocks failed, the blocks went back unchecked: {}", ex.what());
    } catch (...) {
      metrale::core::log().warn("red-zone check of freed blocks failed, the blocks went back unchecked");
    }
    t_in_pass = false;
    serial.unlock();
    drain_retirements(false);  // streams destroyed meanwhile by host kernels
    report_freed_pads(reports);
    // Frees that found the mutex held (or came from this pass's host
    // kernels and log callbacks): another round while they meet a bound.
    // Blocks a round put back (their stream captures) set nothing, so
    // this ends once no thread is left freeing into the pass.
    if (!pass_wanted_.load() || !pad_verify_.bound_met()) return;
    if (!serial.try_lock()) return;  // its holder looks after letting go
    wait_for_other_pass = false;
  }
}

void metrale_context::run_wanted_pass() noexcept {
  if (pass_wanted_.load() && pad_verify_.bound_met()) verify_freed_pads(false);
}

bool metrale_context::in_verify_pass() noexcept { return t_in_pass; }

bool metrale_context::mark_verify_pass(bool on) noexcept {
  const bool was = t_in_pass;
  t_in_pass = on;
  return was;
}

void metrale_context::run_verify_pass(std::vector<FreedPadReport>* reports) {
  std::vector<PendingPad> batch = pad_verify_.take_all();
  if (batch.empty()) return;
  // From here on a failure (a lost device, or no host memory for the
  // pass's lists) sends the blocks it still holds back to the pool
  // unchecked: never lost to it (verify_freed_pads warns).
  try {
    // On its own failure it has released the blocks it took out of batch.
    start_ordered_checks(&batch);
  } catch (...) {
    for (const PendingPad& p : batch) release_checked(p, PatternRange{});  // what it left
    throw;
  }
  if (batch.empty()) {
    pad_verify_.recycle(std::move(batch));
    return;
  }
  // The streams each block was last used on: the one it is freed on (or
  // its own) and those marked with record_stream. Read under the pool's
  // lock: retiring a stream rewrites them.
  // Flat: block i's streams are waits[first[i], first[i + 1]).
  std::vector<StreamHandle>& waits = verify_scratch_.waits;
  std::vector<size_t>& first = verify_scratch_.first;
  waits.clear();
  first.clear();
  // Each stream waited for once per pass; one that captures cannot be, and
  // its blocks wait for a later pass.
  std::vector<StreamHandle> done, refused;
  auto settle = [&](StreamHandle h) {
    if (std::find(done.begin(), done.end(), h) != done.end()) return true;
    if (std::find(refused.begin(), refused.end(), h) != refused.end()) return false;
    bool cap = false;
    if (captures_open_.load(std::memory_order_acquire) != 0) {
      try {
        cap = backend_->stream_is_capturing(h);
      } catch (const Error&) {
        cap = true;
      }
    }
    if (!cap) {
      try {
        sync(h, "red-zone check of freed blocks");
      } catch (const Error& e) {
        // Destroyed meanwhile: its destroy waited for its work.
        if (e.status() != METRALE_ERROR_INVALID_ARGUMENT) {
          if (e.status() != METRALE_ERROR_CAPTURE) throw;
          cap = true;
        }
      }
    }
    (cap ? refused : done).push_back(h);
    return !cap;
  };
  std::vector<PendingPad> later;
  try {
    {
      std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
      for (size_t i = 0; i < batch.size(); ++i) {
        const Block* b = batch[i].entry.block;
        first.push_back(waits.size());
        waits.push_back(batch[i].stream != 0 ? batch[i].stream : b->stream);
        for (StreamHandle u : b->uses) waits.push_back(u);
      }
      first.push_back(waits.size());
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      bool ok = true;
      for (size_t k = first[i]; k < first[i + 1]; ++k) ok = settle(waits[k]) && ok;
      if (!ok) later.push_back(batch[i]);
    }
  } catch (...) {
    // A lost device: the blocks go back unchecked and with no pattern record.
    for (const PendingPad& p : batch) release_checked(p, PatternRange{});
    throw;
  }
  // The batch itself becomes the list of blocks ready for the pass.
  std::vector<PendingPad> ready = std::move(batch);
  if (!later.empty()) {
    try {
      pad_verify_.put_back(later);  // all or none
    } catch (...) {
      for (const PendingPad& p : ready) release_checked(p, PatternRange{});
      throw;
    }
    size_t k = 0;
    for (size_t i = 0; i < ready.size(); ++i) {
      bool deferred = false;
      for (size_t j = first[i]; j < first[i + 1] && !deferred; ++j)
        deferred = std::find(refused.begin(), refused.end(), waits[j]) != refused.end();
      if (!deferred) ready[k++] = ready[i];
    }
    ready.resize(k);
  }
  if (ready.empty()) return;
  // Per block its pad and, when the allocation filled slack after it, that
  // slack as a second range: only the pad is reported (a pad overrun, as a
  // scan reports); dirty slack only costs the block its record.
  std::vector<Range>& ranges = verify_scratch_.ranges;
  std::vector<size_t>& at = verify_scratch_.at;  // block i's pad: ranges[at[i]]; slack next, if any
  std::vector<uint32_t>& bad = verify_scratch_.bad;
  ranges.clear();
  at.clear();
  try {
    for (const PendingPad& p : ready) {
      at.push_back(ranges.size());
      const size_t pad_end = p.check_from + p.entry.pad;
      ranges.push_back(Range{p.ptr + p.check_from, p.entry.pad});
      if (p.check_to > pad_end) ranges.push_back(Range{p.ptr + pad_end, p.check_to - pad_end});
    }
    at.push_back(ranges.size());
    bad.assign(ranges.size(), 0);
    device([&] {
      backend_->pattern_count(ranges.data(), ranges.size(), METRALE_REDZONE_PATTERN, bad.data());
    });
  } catch (...) {
    for (const PendingPad& p : ready) release_checked(p, PatternRange{});
    throw;
  }
  pad_verify_.passes.fetch_add(1, std::memory_order_relaxed);
  pad_verify_.verified.fetch_add(ready.size(), std::memory_order_relaxed);
  bool any_dirty = false;
  for (size_t i = 0; i < ready.size(); ++i) {
    const bool slack_dirty = at[i + 1] - at[i] == 2 && bad[at[i] + 1] != 0;
    any_dirty |= slack_dirty || bad[at[i]] != 0;
    if (bad[at[i]] == 0) continue;
    // Counted even when not reported: pads_overwritten is what the checks
    // found, not what they reported.
    pad_verify_.dirty.fetch_add(1, std::memory_order_relaxed);
    // A scan reported this overrun while the block was live: not again.
    if (pad_verify_.take_reported(ready[i].entry.seq)) continue;
    try {
      reports->push_back(describe_freed_pad(ready[i], bad[at[i]]));
    } catch (...) {
      // Counted; the bytes could not be read back for the report.
    }
  }
  if (any_dirty || scan_fence_.any_open()) {
    for (size_t i = 0; i < ready.size(); ++i) {
      const PendingPad& p = ready[i];
      PatternRange keep;  // pad dirty: none
      if (bad[at[i]] == 0) {
        const bool slack_clean = at[i + 1] - at[i] == 1 || bad[at[i] + 1] == 0;
        keep = PatternRange{p.check_from, slack_clean ? p.check_to : p.check_from + p.entry.pad};
      }
      release_checked(p, keep);
    }
  } else {
    release_all_intact(ready);
  }
  pad_verify_.recycle(std::move(ready));
}
