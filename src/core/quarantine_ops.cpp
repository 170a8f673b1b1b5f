// The freed-memory quarantine on a context: filling and holding freed
// blocks, releasing what the budget pushes out, and the scan that finds
// writes into them (a kernel using a pointer after its free).
#include <algorithm>
#include <new>

#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/pattern_diff.hpp"
#include "core/tags.hpp"

using metrale::Error;
using metrale::fail;
using metrale::backend::Range;
using metrale::core::QuarantinedBlock;

namespace {

// Whether the exception being handled says memory ran out: host memory (a
// node, a list) or the driver's (an event).
bool out_of_memory() noexcept {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return true;
  } catch (const Error& e) {
    return e.status() == METRALE_ERROR_OUT_OF_MEMORY;
  } catch (...) {
    return false;
  }
}

}  // namespace

void metrale_context::quarantine_block(DevPtr ptr, const metrale::core::LedgerEntry& e,
                                       StreamHandle on, const char* file, int line) {
  // What holding the block needs from memory comes first (its list node,
  // its free site, its events), its fill last: a filled block is the
  // quarantine's, and holding it (a node moved) cannot fail. Short of
  // memory before the fill, nothing was queued and the block is freed as
  // without the quarantine (rule 1 either way: a free that fails has
  // changed nothing).
  metrale::core::QuarantineList one;
  bool unquarantined = false;
  try {
    QuarantinedBlock& q = one.emplace_back();
    q.ptr = ptr;
    q.entry = e;
    q.stream = on != 0 ? on
               : e.block != nullptr ? pool_->block_stream(e.block)
                                    : default_stream_->handle;
    q.free_site = ledger_.intern_site(file != nullptr ? file : "<unknown>", line);
    // On the stream it is freed on: after the owner's last use there. Work
    // queued before the free on the other streams that may use it (rule 9)
    // is not ordered before that point, so the fill waits for it, without
    // blocking the free. A write the scan finds then came after the free.
    // The buffer only: the pad keeps what the owner left there, for the
    // red-zone checks (a scan while quarantined, the freed-pad check when it
    // leaves).
    quarantine_waits(&q);  // destroys what it recorded when it throws
    try {
      if (q.filled) {
        fill_quarantined(q);
      } else {
        fill_if_done(q);
      }
    } catch (...) {
      for (EventHandle ev : q.waits) backend_->event_destroy(ev);
      throw;
    }
  } catch (...) {
    if (!out_of_memory()) throw;
    unquarantined = true;
  }
  if (unquarantined) {
    try {
      metrale::core::log().warn("the quarantine had no memory to take {}: freed without it",
                                metrale::core::hex(ptr));
    } catch (...) {
    }
    return release_memory(ptr, e, on, file, line);
  }
  release_quarantined(quarantine_->admit(std::move(one)));
  fill_waiting_quarantined(nullptr);
}

void metrale_context::quarantine_waits(QuarantinedBlock* q) {
  if (q->entry.block == nullptr) {
    // A driver allocation (pool off): its free would wait for the whole
    // device (cuMemFree), so work queued before it on any stream may
    // still use the block. The fill waits for every stream of ctx, under
    // the lock that keeps their backend handles alive.
    std::lock_guard<std::mutex> hold(stream_handles_mutex_);
    std::vector<StreamHandle> streams;
    for (const metrale::core::StreamObj* st : streams_.live()) streams.push_back(st->handle);
    record_quarantine_waits(q, std::move(streams));
    return;
  }
  std::vector<StreamHandle> streams = pool_->uses_of(q->entry.block);
  streams.push_back(pool_->block_stream(q->entry.block));
  record_quarantine_waits(q, std::move(streams));
}

void metrale_context::record_quarantine_waits(QuarantinedBlock* q,
                                              std::vector<StreamHandle> streams) {
  std::sort(streams.begin(), streams.end());
  streams.erase(std::unique(streams.begin(), streams.end()), streams.end());
  streams.erase(std::remove(streams.begin(), streams.end(), q->stream), streams.end());
  if (streams.empty()) return;
  q->filled = false;
  // Room for every event first: an event created and then lost to a full
  // vector would never be destroyed.
  q->waits.reserve(streams.size());
  try {
    for (StreamHandle s : streams) {
      if (device([&] { return backend_->stream_is_capturing(s); })) {
        // Its event would join the graph: the block is never filled.
        for (EventHandle ev : q->waits) backend_->event_destroy(ev);
        q->waits.clear();
        return;
      }
      q->waits.push_back(device([&] { return backend_->event_create(false); }));
      device([&] { backend_->event_record(q->waits.back(), s); });
    }
  } catch (...) {
    for (EventHandle ev : q->waits) backend_->event_destroy(ev);
    throw;
  }
}

bool metrale_context::waits_done(const QuarantinedBlock& q) {
  for (EventHandle ev : q.waits) {
    if (!device([&] { return backend_->event_query(ev); })) return false;
  }
  // Into a capture the fill would wait for the graph's launch.
  return !device([&] { return backend_->stream_is_capturing(q.stream); });
}

bool metrale_context::fill_if_done(QuarantinedBlock& q) {
  if (!waits_done(q)) return false;
  fill_quarantined(q);
  for (EventHandle ev : q.waits) backend_->event_destroy(ev);
  q.waits.clear();
  q.filled = true;
  return true;
}

void metrale_context::fill_quarantined(const QuarantinedBlock& q) {
  device([&] { backend_->memset_async(q.ptr, METRALE_QUARANTINE_PATTERN, q.body(), q.stream); });
  // compute-sanitizer sees the block as freed from now on.
  if (q.entry.block != nullptr) chunk_source_->block_returned(q.ptr);
}

void metrale_context::fill_waiting_quarantined(std::vector<StreamHandle>* filled_on) noexcept {
  try {
    // The fills run without the quarantine's lock (a host kernel on their
    // stream may free into it) but inside a pass: a block pushed out and
    // released meanwhile stays allocated until the pass ends, after its
    // fill was queued on its stream, before any reuse.
    auto release = [this](const std::vector<metrale::core::ScanFence::Released>& held) {
      free_held(held);
    };
    metrale::core::ScanPass<decltype(release)> pass(scan_fence_, release);
    const std::vector<QuarantinedBlock> ready =
        quarantine_->ready_to_fill([&](const QuarantinedBlock& q) {
          try {
            return waits_done(q);
          } catch (...) {
            return false;  // asked again at the next free or scan
          }
        });
    for (const QuarantinedBlock& q : ready) {
      try {
        device([&] {
          backend_->memset_async(q.ptr, METRALE_QUARANTINE_PATTERN, q.body(), q.stream);
        });
      } catch (const std::exception& ex) {
        metrale::core::log().debug("filling quarantined {} failed, tried again later: {}",
                                   metrale::core::hex(q.ptr), ex.what());
        continue;
      }
      // Pushed out meanwhile: its release destroyed the waits and told
      // the tools it is freed.
      if (!quarantine_->mark_filled(q.serial)) continue;
      for (EventHandle ev : q.waits) backend_->event_destroy(ev);
      if (q.entry.block != nullptr) chunk_source_->block_returned(q.ptr);
      if (filled_on != nullptr) filled_on->push_back(q.stream);
    }
  } catch (...) {
    // Out of host memory for the list: the fills are tried again later.
  }
}

void metrale_context::release_quarantined(const metrale::core::QuarantineList& out) noexcept {
  for (const QuarantinedBlock& q : out) {
    try {
      if (!q.filled) {
        // Never filled: its streams may still use it, and the pool waits
        // for them (its uses, and a free on q.stream from another stream
        // counts as one), so it keeps its own stream.
        for (EventHandle ev : q.waits) backend_->event_destroy(ev);
        if (q.entry.block != nullptr) chunk_source_->block_returned(q.ptr);
      }
      // A padded pooled block leaves through the freed-pad check, with its
      // free's site: an overrun before its free is reported then.
      if (q.entry.pad > 0 && q.entry.block != nullptr &&
          hold_for_verify(q.ptr, q.entry, q.stream, ledger_.site_file(q.free_site),
                          ledger_.site_line(q.free_site))) {
        continue;
      }
      // A quarantine scan may be reading the whole block: held back like a pad.
      if (q.entry.block != nullptr && q.filled) pool_->set_stream(q.entry.block, q.stream);
      if (scan_fence_.hold(q.ptr, q.entry.block)) continue;
      release_now(q.ptr, q.entry, q.stream);
    } catch (const std::exception& ex) {
      metrale::core::log().debug("releasing {} from the quarantine failed: {}",
                                 metrale::core::hex(q.ptr), ex.what());
    } catch (...) {
      metrale::core::log().debug("releasing {} from the quarantine failed",
                                 metrale::core::hex(q.ptr));
    }
  }
}

// Exact under concurrent frees, as the red-zone scan: the blocks are
// snapshotted inside a ScanFence pass (one pushed out meanwhile stays
// allocated until the pass ends), and a block is reported only when it is
// still quarantined after its bytes were read back.
std::vector<metrale_use_after_free_t> metrale_context::find_use_after_free(
    size_t* waits, std::vector<metrale_redzone_violation_t>* pads) {
  std::vector<metrale_use_after_free_t> found;
  if (!quarantine_ || quarantine_->bytes() == 0) return found;
  auto release = [this](const std::vector<metrale::core::ScanFence::Released>& held) {
    free_held(held);
  };
  metrale::core::ScanPass<decltype(release)> pass(scan_fence_, release);
  // Blocks whose other streams have finished since their free are filled
  // now, and checked once the fill has run.
  std::vector<StreamHandle> filled_on;
  fill_waiting_quarantined(&filled_on);
  std::sort(filled_on.begin(), filled_on.end());
  filled_on.erase(std::unique(filled_on.begin(), filled_on.end()), filled_on.end());
  for (StreamHandle h : filled_on) {
    sync_uncounted(h, "quarantine scan");
    ++*waits;
  }
  const std::vector<QuarantinedBlock> held = quarantine_->snapshot();
  if (held.empty()) return found;
  std::vector<Range> ranges;
  std::vector<size_t> checked;  // an unfilled buffer holds no pattern: not read
  ranges.reserve(held.size());
  for (size_t i = 0; i < held.size(); ++i) {
    if (!held[i].filled) continue;
    ranges.push_back(Range{held[i].ptr, held[i].body()});
    checked.push_back(i);
  }
  std::vector<uint32_t> mismatches(ranges.size(), 0);
  if (!ranges.empty()) {
    device([&] {
      backend_->pattern_count(ranges.data(), ranges.size(), METRALE_QUARANTINE_PATTERN,
                              mismatches.data());
    });
  }
  std::vector<uint8_t> bytes;
  auto read_back = [&](DevPtr from, size_t n) {
    if (device([&] { return backend_->stream_is_capturing(default_stream_->handle); })) {
      fail(METRALE_ERROR_CAPTURE,
           "quarantine scan: freed blocks were written, and reading them back needs the "
           "default stream, which is capturing; end or abort the capture first");
    }
    bytes.assign(n, 0);
    device([&] { backend_->copy_d2h_async(bytes.data(), from, n, default_stream_->handle); });
    sync_uncounted(default_stream_->handle, "quarantine scan");
    ++*waits;
  };
  if (pads != nullptr) quarantined_pads(held, read_back, &bytes, pads);
  for (size_t k = 0; k < checked.size(); ++k) {
    if (mismatches[k] == 0) continue;
    const QuarantinedBlock& q = held[checked[k]];
    read_back(q.ptr, q.body());
    if (!quarantine_->holds(q.serial)) continue;  // released meanwhile: not ours to judge
    metrale_use_after_free_t u{};
    u.ptr = q.ptr;
    u.bytes = q.entry.bytes;
    u.seq = q.entry.seq;
    u.alloc_file = ledger_.site_file(q.entry.site);
    u.alloc_line = ledger_.site_line(q.entry.site);
    u.free_file = ledger_.site_file(q.free_site);
    u.free_line = ledger_.site_line(q.free_site);
    u.bad_bytes = metrale::core::describe_difference(bytes.data(), bytes.size(),
                                                     METRALE_QUARANTINE_PATTERN, mismatches[k],
                                                     &u.first_bad_offset, &u.found);
    found.push_back(u);
  }
  return found;
}

void metrale_context::quarantine_scan(metrale_use_after_free_t* out, size_t cap, size_t* count) {
  fault_.check();
  refuse_in_any_work("metrale_quarantine_scan");
  *count = 0;
  if (!quarantine_ || quarantine_->bytes() == 0) return;
  size_t waits = settle_streams_before_scan();
  const std::vector<metrale_use_after_free_t> found = find_use_after_free(&waits);
  metrale::core::Counters::bump(counters_.stream_syncs, waits);
  for (size_t i = 0; i < found.size() && i < cap; ++i) out[i] = found[i];
  *count = found.size();
  log_scan(found);
  if (found.empty()) return;
  fail(METRALE_ERROR_REDZONE_CORRUPTED, metrale::core::plural(found.size(), "freed block") +
                                            " written after free; first: " +
                                            use_after_free_text(found.front()));
}

void metrale_context::check_quarantine_at_destroy() {
  if (!quarantine_ || quarantine_->bytes() == 0) return;
  size_t waits = settle_streams_before_scan();
  // With the pool off no freed-pad check follows (a driver block leaves the
  // quarantine unchecked): the pads of the blocks still held are read here.
  std::vector<metrale_redzone_violation_t> pads;
  const std::vector<metrale_use_after_free_t> found =
      find_use_after_free(&waits, pool_ ? nullptr : &pads);
  metrale::core::Counters::bump(counters_.stream_syncs, waits);
  for (const metrale_use_after_free_t& u : found) {
    metrale::core::log().error("freed block written after its free (found at the context's "
                               "destroy): {}",
                               use_after_free_text(u));
  }
  log_scan(found);
  if (pads.empty()) return;
  const std::vector<QuarantinedBlock> held = quarantine_->snapshot();
  std::vector<FreedPadReport> reports;
  for (const metrale_redzone_violation_t& v : pads) {
    FreedPadReport r{};
    r.v = v;
    r.free_file = "<unknown>";
    for (const QuarantinedBlock& q : held) {
      if (q.ptr != v.ptr || q.entry.seq != v.seq) continue;
      r.free_file = ledger_.site_file(q.free_site);
      r.free_line = ledger_.site_line(q.free_site);
      r.tag = metrale::core::tags::name(q.entry.tag);
    }
    reports.push_back(r);
  }
  report_freed_pads(reports);
}

std::string metrale_context::use_after_free_text(const metrale_use_after_free_t& u) {
  return metrale::core::hex(u.ptr) + " (" + std::to_string(u.bytes) + " bytes, seq " +
         std::to_string(u.seq) + "), allocated at " +
         metrale::core::site_text(u.alloc_file, u.alloc_line) + ", freed at " +
         metrale::core::site_text(u.free_file, u.free_line) + ": " +
         std::to_string(u.bad_bytes) + " bytes changed, " +
         metrale::core::first_bad_text(u.first_bad_offset, " of the buffer",
                                       METRALE_QUARANTINE_PATTERN, u.found);
}

template <class ReadBack>
void metrale_context::quarantined_pads(const std::vector<QuarantinedBlock>& held,
                                       ReadBack& read_back, std::vector<uint8_t>* bytes,
                                       std::vector<metrale_redzone_violation_t>* found) {
  std::vector<Range> ranges;
  std::vector<size_t> owner;
  for (size_t i = 0; i < held.size(); ++i) {
    if (held[i].entry.pad == 0) continue;
    ranges.push_back(Range{held[i].ptr + held[i].entry.bytes, held[i].entry.pad});
    owner.push_back(i);
  }
  if (ranges.empty()) return;
  std::vector<uint32_t> bad(ranges.size(), 0);
  device([&] {
    backend_->pattern_count(ranges.data(), ranges.size(), METRALE_REDZONE_PATTERN, bad.data());
  });
  for (size_t k = 0; k < ranges.size(); ++k) {
    const QuarantinedBlock& q = held[owner[k]];
    // Reported once, as a freed pad: again neither here nor at its check.
    if (bad[k] == 0 || pad_verify_.was_reported(q.entry.seq)) continue;
    read_back(ranges[k].ptr, ranges[k].bytes);
    if (!quarantine_->holds(q.serial)) continue;
    metrale_redzone_violation_t v{};
    v.ptr = q.ptr;
    v.bytes = q.entry.bytes;
    v.seq = q.entry.seq;
    v.file = ledger_.site_file(q.entry.site);
    v.line = ledger_.site_line(q.entry.site);
    v.expected = METRALE_REDZONE_PATTERN;
    v.bad_bytes = metrale::core::describe_difference(bytes->data(), bytes->size(),
                                                     METRALE_REDZONE_PATTERN, bad[k],
                                                     &v.first_bad_offset, &v.found);
    // Not counted in pads_overwritten here: the block's check of freed
    // pads, when it leaves the quarantine, reads the pad and counts it.
    // Noted as reported by the scan, once it cannot fail.
    found->push_back(v);
  }
}

size_t metrale_context::quarantine_violations(std::vector<metrale_redzone_violation_t>* found,
                                             std::vector<uint64_t>* reported) {
  std::vector<metrale_redzone_violation_t> pads;
  size_t waits = 0;
  for (const metrale_use_after_free_t& u : find_use_after_free(&waits, &pads)) {
    metrale_redzone_violation_t v{};
    v.ptr = u.ptr;
    v.bytes = u.bytes;
    v.seq = u.seq;
    v.file = u.alloc_file;
    v.line = u.alloc_line;
    v.first_bad_offset = u.first_bad_offset;
    v.bad_bytes = u.bad_bytes;
    v.expected = METRALE_QUARANTINE_PATTERN;
    v.found = u.found;
    found->push_back(v);
  }
  found->insert(found->end(), pads.begin(), pads.end());
  for (const metrale_redzone_violation_t& v : pads) reported->push_back(v.seq);
  return waits;
}
