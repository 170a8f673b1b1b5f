// The check of freed padded pool blocks in stream order (the fast form of
// pad_verify_ops.cpp's pass). Blocks used on one stream only (no
// record_stream marks) are checked by one backend pass queued on the
// stream they were freed on: it reads each pad, notes what it finds and
// writes the pattern back. The blocks go back to the pool at once, with
// their pattern record: whatever runs on that stream after the pass finds
// the pad intact, and another stream takes a block only after the free's
// event, which follows the pass. No stream is waited for. The results are
// read when the pass has finished, at the next pass or, waiting, at a scan
// and at teardown; only then is an overwritten pad reported.
#include <algorithm>
#include <utility>
#include <vector>

#include "core/context.hpp"
#include "core/log.hpp"
#include "core/tags.hpp"

using metrale::Error;
using metrale::backend::Range;
using metrale::core::PendingPad;
using metrale::core::pool::PatternRange;

namespace {

struct Group {
  metrale::backend::StreamHandle stream;
  std::vector<PendingPad> pads;
};

}  // namespace

void metrale_context::start_ordered_checks(std::vector<PendingPad>* batch) {
  if (!ordered_checks_ok_ || scan_fence_.any_open() || batch->empty()) return;
  // The common case first: every block freed on one stream, none marked
  // on another; one pass, with no grouping and no copy.
  StreamHandle only = 0;
  bool single = true;
  {
    std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
    for (const PendingPad& p : *batch) {
      const StreamHandle h = p.stream != 0 ? p.stream : p.entry.block->stream;
      if (!p.entry.block->uses.empty() || (only != 0 && h != only)) {
        single = false;
        break;
      }
      only = h;
    }
  }
  if (single) {
    try {
      if (start_ordered_check(only, batch)) batch->clear();
    } catch (...) {
      // A lost device: the blocks go back unchecked.
      for (const PendingPad& p : *batch) release_checked(p, PatternRange{});
      batch->clear();
      throw;
    }
    return;
  }
  // Blocks by freeing stream; those marked on other streams stay in *batch
  // for the synchronous pass (it waits for each of their streams).
  std::vector<Group> groups;
  std::vector<PendingPad> rest;
  {
    std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
    std::vector<size_t> group_of(batch->size());
    for (size_t i = 0; i < batch->size(); ++i) {
      const PendingPad& p = (*batch)[i];
      if (!p.entry.block->uses.empty()) {
        group_of[i] = SIZE_MAX;
        continue;
      }
      const StreamHandle h = p.stream != 0 ? p.stream : p.entry.block->stream;
      size_t g = 0;
      while (g < groups.size() && groups[g].stream != h) ++g;
      if (g == groups.size()) groups.push_back(Group{h, {}});
      group_of[i] = g;
    }
    for (size_t i = 0; i < batch->size(); ++i) {
      (group_of[i] == SIZE_MAX ? rest : groups[group_of[i]].pads).push_back((*batch)[i]);
    }
  }
  batch->clear();
  for (size_t g = 0; g < groups.size(); ++g) {
    try {
      if (!start_ordered_check(groups[g].stream, &groups[g].pads))
        rest.insert(rest.end(), groups[g].pads.begin(), groups[g].pads.end());
    } catch (...) {
      // A lost device: these blocks and the rest go back unchecked.
      for (size_t k = g; k < groups.size(); ++k)
        for (const PendingPad& p : groups[k].pads) release_checked(p, PatternRange{});
      for (const PendingPad& p : rest) release_checked(p, PatternRange{});
      throw;
    }
  }
  *batch = std::move(rest);
}

bool metrale_context::start_ordered_check(StreamHandle h, std::vector<PendingPad>* pads) {
  std::vector<Range>& ranges = verify_scratch_.ranges;
  OrderedCheck check;
  // Per block its pad and, when the allocation filled slack after it, that
  // slack too: restored with the pad, reported never (as in the pass).
  // Written in place (at most two per block; no capacity test per range).
  ranges.resize(2 * pads->size());
  Range* out = ranges.data();
  size_t k = 0;
  for (PendingPad& p : *pads) {
    p.result = k;
    const size_t pad_end = p.check_from + p.entry.pad;
    out[k++] = Range{p.ptr + p.check_from, p.entry.pad};
    if (p.check_to > pad_end) out[k++] = Range{p.ptr + pad_end, p.check_to - pad_end};
  }
  ranges.resize(k);
  check.ranges = ranges.size();
  // Its place in the list before the pass is queued: a pass queued and
  // then dropped for want of memory would hold its backend slot for good.
  ordered_checks_.reserve(ordered_checks_.size() + 1);
  try {
    check.ticket = device([&] {
      return backend_->pad_check_async(ranges.data(), ranges.size(), METRALE_REDZONE_PATTERN, h);
    });
  } catch (const Error& e) {
    // Capturing, or destroyed meanwhile: the synchronous pass sorts them out.
    if (e.status() == METRALE_ERROR_CAPTURE || e.status() == METRALE_ERROR_INVALID_ARGUMENT)
      return false;
    throw;
  }
  if (check.ticket == 0) return false;  // no kernels, or every slot busy
  pad_verify_.passes.fetch_add(1, std::memory_order_relaxed);
  pad_verify_.verified.fetch_add(pads->size(), std::memory_order_relaxed);
  release_all_intact(*pads);
  check.pads = std::move(*pads);
  ordered_checks_.push_back(std::move(check));
  ordered_checks_open_.fetch_add(1, std::memory_order_release);
  return true;
}

void metrale_context::collect_ordered_checks(bool wait, std::vector<FreedPadReport>* reports) {
  std::vector<metrale::backend::Backend::PadCheck>& results = verify_scratch_.results;
  size_t k = 0;
  std::exception_ptr failed;
  for (size_t i = 0; i < ordered_checks_.size(); ++i) {
    OrderedCheck& c = ordered_checks_[i];
    bool done = false;
    if (failed == nullptr) {
      results.resize(c.ranges);
      try {
        done = device([&] { return backend_->pad_check_take(c.ticket, wait, results.data()); });
      } catch (...) {
        // Its findings are lost (the ticket is spent); the blocks are back.
        failed = std::current_exception();
        ordered_checks_open_.fetch_sub(1, std::memory_order_release);
        continue;
      }
    }
    if (!done) {
      if (k != i) ordered_checks_[k] = std::move(c);
      ++k;
      continue;
    }
    ordered_checks_open_.fetch_sub(1, std::memory_order_release);
    // Most passes find nothing: one look over the results (a dirty slack
    // range included), and the blocks only when some range was dirty.
    uint32_t any_bad = 0;
    for (size_t j = 0; j < c.ranges; ++j) any_bad |= results[j].bad_bytes;
    for (size_t j = 0; any_bad != 0 && j < c.pads.size(); ++j) {
      const metrale::backend::Backend::PadCheck& r = results[c.pads[j].result];
      if (r.bad_bytes == 0) continue;
      const PendingPad& p = c.pads[j];
      pad_verify_.dirty.fetch_add(1, std::memory_order_relaxed);  // reported or not (as the pass)
      // A scan reported this overrun while the block was live: not again.
      if (pad_verify_.take_reported(p.entry.seq)) continue;
      reports->push_back(describe_checked_pad(p, r));
    }
    pad_verify_.recycle(std::move(c.pads));  // its storage serves a later batch
  }
  ordered_checks_.resize(k);
  if (failed != nullptr) std::rethrow_exception(failed);
}

metrale_context::FreedPadReport metrale_context::describe_checked_pad(
    const PendingPad& p, const metrale::backend::Backend::PadCheck& r) {
  // From the pass's own findings: the block may be reused by now, so its
  // bytes are not read back (describe_freed_pad does that).
  FreedPadReport out = freed_pad_report(p);
  out.v.bad_bytes = r.bad_bytes;
  out.v.first_bad_offset = r.first_bad;
  out.v.found = static_cast<uint8_t>(r.found);
  return out;
}
