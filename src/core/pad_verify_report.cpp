// Reporting what the red-zone check of freed blocks found
// (pad_verify_ops.cpp): the overwritten pad read back, the message with both
// sites and the tag, the log line, the event log, and the list the next
// metrale_redzone_scan reports.
#include <iterator>
#include <string>
#include <vector>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/pattern_diff.hpp"
#include "core/tags.hpp"

using metrale::core::PendingPad;

metrale_context::FreedPadReport metrale_context::freed_pad_report(const PendingPad& p) {
  FreedPadReport r{};
  metrale_redzone_violation_t& v = r.v;
  v.ptr = p.ptr;
  v.bytes = p.entry.bytes;
  v.seq = p.entry.seq;
  v.file = ledger_.site_file(p.entry.site);
  v.line = ledger_.site_line(p.entry.site);
  v.expected = METRALE_REDZONE_PATTERN;
  r.free_file = ledger_.site_file(p.free_site);
  r.free_line = ledger_.site_line(p.free_site);
  r.tag = metrale::core::tags::name(p.entry.tag);
  r.earlier = logged_earlier_owners(p);
  return r;
}

metrale_context::FreedPadReport metrale_context::describe_freed_pad(const PendingPad& p,
                                                                    uint32_t counted) {
  FreedPadReport r = freed_pad_report(p);
  metrale_redzone_violation_t& v = r.v;
  v.bad_bytes = counted;
  // The stream the block was freed on has been waited for and is not
  // capturing: the read back goes there.
  const StreamHandle h = p.stream != 0 ? p.stream : pool_->block_stream(p.entry.block);
  std::vector<uint8_t> bytes(p.entry.pad, 0);  // the pad: what a scan reports
  device([&] {
    backend_->copy_d2h_async(bytes.data(), p.ptr + p.check_from, bytes.size(), h);
  });
  sync(h, "red-zone check of freed blocks");
  v.bad_bytes = metrale::core::describe_difference(bytes.data(), bytes.size(),
                                                   METRALE_REDZONE_PATTERN, counted,
                                                   &v.first_bad_offset, &v.found);
  return r;
}

void metrale_context::report_freed_pads(const std::vector<FreedPadReport>& reports) {
  if (reports.empty()) return;
  // Listed for the next scan before any line is logged: a log callback
  // (or another thread) that scans on seeing the line finds it there.
  {
    std::lock_guard<std::mutex> lock(freed_reports_mutex_);
    for (const FreedPadReport& r : reports) {
      if (freed_reports_.size() < kMaxFreedReports)
        freed_reports_.push_back(r);
      else
        pad_verify_.unlisted.fetch_add(1, std::memory_order_relaxed);  // logged above only
    }
  }
  std::vector<metrale_redzone_violation_t> found;
  for (const FreedPadReport& r : reports) {
    found.push_back(r.v);
    metrale::core::log().error("{}", freed_pad_message(r));
    if (!r.earlier.empty()) stop_pad_reuse("an overwritten pad was found on a reused block");
  }
  log_scan(found);
}

std::string metrale_context::freed_pad_message(const FreedPadReport& r) {
  const metrale_redzone_violation_t& v = r.v;
  return "red-zone pad overwritten before its free: " + metrale::core::hex(v.ptr) + " (" +
         std::to_string(v.bytes) + " bytes, seq " + std::to_string(v.seq) +
         (r.tag != nullptr ? ", tag " + std::string(r.tag) : "") + "), allocated at " +
         metrale::core::site_text(v.file, v.line) + ", freed at " +
         metrale::core::site_text(r.free_file, r.free_line) + ": " +
         std::to_string(v.bad_bytes) + " bad bytes, " +
         metrale::core::first_bad_text(v.first_bad_offset, " past the end", v.expected, v.found) +
         (r.earlier.empty() ? std::string() : "; written by it " + r.earlier);
}

std::vector<metrale_context::FreedPadReport> metrale_context::take_freed_reports() {
  std::lock_guard<std::mutex> lock(freed_reports_mutex_);
  std::vector<FreedPadReport> out;
  out.swap(freed_reports_);
  return out;
}

void metrale_context::put_back_freed_reports(std::vector<FreedPadReport>&& taken) noexcept {
  if (taken.empty()) return;
  std::lock_guard<std::mutex> lock(freed_reports_mutex_);
  try {
    // Oldest first, ahead of any found meanwhile; the bound is the list's
    // own (what a failed scan took was within it when taken).
    taken.insert(taken.end(), std::make_move_iterator(freed_reports_.begin()),
                 std::make_move_iterator(freed_reports_.end()));
    freed_reports_.swap(taken);
  } catch (...) {
    // Out of host memory: those findings stay in the error log only, where
    // each was written when its check found it.
  }
}
