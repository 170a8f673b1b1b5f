// Red-zone scan and poison: one batched backend pass over every pad, and a
// host copy only of the pads that came back dirty.
#include <algorithm>
#include <vector>

#include "core/context.hpp"
#include "core/tags.hpp"
#include "core/format.hpp"
#include "core/pattern_diff.hpp"

using metrale::Error;
using metrale::fail;
using metrale::backend::Range;

// The pads whose bytes are not all the pattern, each with its range and
// owner as they were at the snapshot. Through the context's PadMirror when
// this scan gets it (O(changes) to copy; the backend may keep its table);
// else, when another scan holds the mirror, from a snapshot of its own.
// Call inside a ScanPass.
std::vector<metrale_context::DirtyPad> metrale_context::find_dirty_pads() {
  using Hit = metrale::backend::Backend::PadHit;
  std::vector<Hit> hits;
  std::vector<DirtyPad> dirty;
  metrale::core::PadMirror::Lease lease(pad_mirror_);
  if (lease.held()) {
    pad_mirror_.refresh(ledger_);
    const size_t n = pad_mirror_.size();
    if (n == 0) {
      // The backend is not called: have the next call send it the whole
      // table rather than reason about what it missed.
      pad_mirror_.backend_begin();
      return dirty;
    }
    const std::vector<uint32_t>& changed = pad_mirror_.changed();
    pad_mirror_.backend_begin();
    device([&] {
      backend_->pattern_count_table(pad_mirror_.ranges(), n, changed.data(), changed.size(),
                                    pad_mirror_.whole(), METRALE_REDZONE_PATTERN, &hits);
    });
    pad_mirror_.backend_done();
    for (const Hit& h : hits) {
      if (h.slot >= n) continue;  // never from a correct backend
      dirty.push_back(
          DirtyPad{pad_mirror_.ranges()[h.slot], pad_mirror_.owner(h.slot), h.bad_bytes});
    }
    return dirty;
  }
  std::vector<Range> zones;
  std::vector<metrale::core::PadOwner> owners;
  ledger_.pads(&zones, &owners);
  if (zones.empty()) return dirty;
  std::vector<uint32_t> mismatches(zones.size(), 0);
  device([&] {
    backend_->pattern_count(zones.data(), zones.size(), METRALE_REDZONE_PATTERN,
                            mismatches.data());
  });
  for (size_t i = 0; i < zones.size(); ++i) {
    if (mismatches[i] != 0) dirty.push_back(DirtyPad{zones[i], owners[i], mismatches[i]});
  }
  return dirty;
}

// The live pads found overwritten and the quarantine's findings, for
// redzone_scan; throws (CAPTURE, a device error) with nothing marked.
// Returns the streams it waited for, for the caller to count.
size_t metrale_context::find_scan_violations(std::vector<metrale_redzone_violation_t>* found,
                                             std::vector<uint64_t>* live_reported) {
  // Before the pass opens: frees are not held back while streams drain.
  size_t waits = settle_streams_before_scan();
  {
    auto release = [this](const std::vector<metrale::core::ScanFence::Released>& held) {
      free_held(held);
    };
    metrale::core::ScanPass<decltype(release)> pass(scan_fence_, release);
    const std::vector<DirtyPad> dirty = find_dirty_pads();

    // Dirty pads are read back on the default stream. While that stream
    // captures, the copy would be recorded into the caller's graph, aimed at
    // this function's buffer: replaying it would write freed memory. Refuse
    // before anything is recorded.
    if (!dirty.empty() &&
        device([&] { return backend_->stream_is_capturing(default_stream_->handle); })) {
      fail(METRALE_ERROR_CAPTURE,
           "red-zone scan: pads were overwritten, and reading them back needs the default "
           "stream, which is capturing; end or abort the capture first");
    }

    std::vector<uint8_t> pad_bytes;
    for (const DirtyPad& d : dirty) {
      metrale::core::LedgerEntry e;
      // Freed since the snapshot: its pad is no one's business any more.
      if (!ledger_.lookup_seq(d.owner.ptr, d.owner.seq, &e)) continue;
      pad_bytes.assign(d.zone.bytes, 0);
      const Range zone = d.zone;
      device([&] {
        backend_->copy_d2h_async(pad_bytes.data(), zone.ptr, zone.bytes, default_stream_->handle);
      });
      sync_uncounted(default_stream_->handle, "red-zone scan");
      ++waits;
      // Live for the whole scan, or not reported: a free during the read
      // back means the bytes may already belong to the caller's next use.
      if (!ledger_.lookup_seq(d.owner.ptr, d.owner.seq, &e)) continue;
      metrale_redzone_violation_t v{};
      v.ptr = d.owner.ptr;
      v.bytes = e.bytes;
      v.seq = e.seq;
      v.file = ledger_.site_file(e.site);
      v.line = ledger_.site_line(e.site);
      v.expected = METRALE_REDZONE_PATTERN;
      v.bad_bytes = metrale::core::describe_difference(pad_bytes.data(), zone.bytes,
                                                       METRALE_REDZONE_PATTERN, d.bad_bytes,
                                                       &v.first_bad_offset, &v.found);
      found->push_back(v);
      live_reported->push_back(v.seq);
    }
  }
  // Writes into freed, quarantined blocks (a pass of its own).
  return waits + quarantine_violations(found, live_reported);
}

// Exact under concurrent alloc and free (rule 4 in the header): the pads
// are snapshotted with their owners' seqs inside a ScanFence pass, so memory
// freed meanwhile stays allocated (nobody else gets its address) until the
// pass closes, and a pad is reported only when the same seq is still live
// after its bytes were read back. No lock is held across device work but the
// PadMirror's, which only scans take and never wait for.
void metrale_context::redzone_scan(metrale_redzone_violation_t* out, size_t cap, size_t* count) {
  fault_.check();
  refuse_in_any_work("metrale_redzone_scan");
  *count = 0;
  // Freed padded blocks still waiting for their check (and those reused
  // unchecked, METRALE_REDZONE_REUSE) are checked now, so an overrun by an
  // allocation freed before this scan is reported by it.
  flush_unchecked_pads();
  if (pad_verify_.count() != 0 || ordered_checks_open()) verify_freed_pads(true);
  std::vector<FreedPadReport> freed = take_freed_reports();
  std::vector<metrale_redzone_violation_t> found;
  std::vector<uint64_t> live_reported;  // marked once this call reports them
  std::string message;  // the failure's, when something was found
  bool stop_reuse = false;
  bool committed = false;
  try {
    if (ledger_.pad_count() == 0 && quarantined_bytes() == 0 && freed.empty()) return;
    const size_t waits = find_scan_violations(&found, &live_reported);
    // Pads of blocks freed since the last scan, found by the batch checks.
    found.reserve(found.size() + freed.size());
    for (const FreedPadReport& r : freed) found.push_back(r.v);
    std::sort(found.begin(), found.end(),
              [](const auto& a, const auto& b) { return a.seq < b.seq; });
    if (!found.empty()) message = scan_failure_text(found, freed, &stop_reuse);
    // What may run out of memory is done: the error to throw is made now
    // (throwing a copy allocates nothing), then the scan commits. Their
    // frees' checks stay quiet about what this call reports (all or none
    // marked), and the waits count (rule 1).
    const metrale::Error corrupted(METRALE_ERROR_REDZONE_CORRUPTED, std::move(message));
    pad_verify_.note_reported(live_reported);
    committed = true;
    metrale::core::Counters::bump(counters_.stream_syncs, waits);
    for (size_t i = 0; i < found.size() && i < cap; ++i) out[i] = found[i];
    *count = found.size();
    log_scan_quietly(found);
    if (found.empty()) return;
    if (stop_reuse) stop_pad_reuse("a scan found an overwritten pad on a reused block");
    throw corrupted;
  } catch (...) {
    // A failed scan reports nothing: the next one reports what this took.
    if (!committed) put_back_freed_reports(std::move(freed));
    throw;
  }
}

// The message of a scan that found `found` (sorted by seq; not empty).
// *stop_reuse: the first is a block reused unchecked, whose reuse stops.
std::string metrale_context::scan_failure_text(
    const std::vector<metrale_redzone_violation_t>& found,
    const std::vector<FreedPadReport>& freed, bool* stop_reuse) {
  const auto& v = found.front();
  // Overwritten before its free: the message names the free's site too.
  for (const FreedPadReport& r : freed) {
    if (r.v.ptr == v.ptr && r.v.seq == v.seq) {
      return metrale::core::plural(found.size(), "red-zone pad") + " overwritten; first: " +
             freed_pad_message(r);
    }
  }
  // Its tag (core/tags.hpp) when it is still live (a quarantined block is not).
  metrale::core::LedgerEntry first;
  const char* tag =
      ledger_.lookup_seq(v.ptr, v.seq, &first) ? metrale::core::tags::name(first.tag) : nullptr;
  // A quarantined buffer written after its free: the offset is within it.
  const bool after_free = v.expected == METRALE_QUARANTINE_PATTERN;
  // A block reused unchecked: its earlier owners may have written the pad.
  const std::string earlier = after_free ? std::string() : live_pad_earlier_owners(v.ptr, v.seq);
  *stop_reuse = !earlier.empty();
  return (after_free ? metrale::core::plural(found.size(), "red-zone violation")
                     : metrale::core::plural(found.size(), "red-zone pad") + " overwritten") +
         "; first: " + metrale::core::hex(v.ptr) + " (" + std::to_string(v.bytes) + " bytes, seq " +
         std::to_string(v.seq) + (tag != nullptr ? ", tag " + std::string(tag) : "") + ") from " +
         metrale::core::site_text(v.file, v.line) +
         (after_free ? ": written after its free (quarantined), " + std::to_string(v.bad_bytes) +
                           " bytes changed, "
                     : ": " + std::to_string(v.bad_bytes) + " bad bytes, ") +
         metrale::core::first_bad_text(v.first_bad_offset,
                                       after_free ? " of the buffer" : " past the end", v.expected,
                                       v.found) +
         (earlier.empty() ? std::string() : "; written by it " + earlier);
}

void metrale_context::redzone_poison(uint64_t lo, uint64_t hi) {
  if (lo > hi) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "lo (" + std::to_string(lo) + ") is greater than hi (" + std::to_string(hi) + ")");
  }
  fault_.check();
  // A pass, as in the scan: a pad freed after the snapshot is still ours to
  // write, never a new allocation's bytes at the same address.
  auto release = [this](const std::vector<metrale::core::ScanFence::Released>& held) {
    free_held(held);
  };
  metrale::core::ScanPass<decltype(release)> pass(scan_fence_, release);
  std::vector<Range> zones;
  std::vector<uint64_t> seqs;
  for (const metrale::core::Ledger::SeqPad& p : ledger_.pads_with_seq(lo, hi)) {
    // A pad shared unchecked with earlier owners (METRALE_REDZONE_REUSE) may
    // hold an overrun of theirs that nothing has reported: refilling it would
    // erase that. It stays for the next scan or its free's check, which name
    // those owners; once a scan has reported it, it is repaired like any.
    if (p.earlier_unchecked && !pad_verify_.was_reported(p.seq)) continue;
    zones.push_back(p.zone);
    seqs.push_back(p.seq);
  }
  if (zones.empty()) return;
  device([&] { backend_->pattern_fill(zones.data(), zones.size(), METRALE_REDZONE_PATTERN); });
  pad_verify_.forget_reported(seqs);  // repaired: a later overrun there is new
}
