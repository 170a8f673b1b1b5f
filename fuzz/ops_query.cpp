// Ledger, report, red zones, telemetry, device queries, a foreign context
// and the context-free functions, each answer checked against the model.
#include <cmath>
#include <cstddef>

#include "fuzz_state.hpp"

namespace fuzz {

namespace {

// Every string the library hands out must be readable up to its NUL.
void readable(const char* s, const char* what) {
  if (s == nullptr) violated("NULL string", what, METRALE_OK);
  volatile size_t n = std::strlen(s);
  (void)n;
}

size_t pick_cap(Bytes& in, size_t count) {
  switch (in.pick(4)) {
    case 0: return 0;
    case 1: return count;
    case 2: return count + 1 + in.pick(4);
    default: return count ? in.pick(count) : 1;
  }
}

// The ledger listing, oldest first, equals the model's ledger allocations.
void compare_listing(State& st, Bytes& in) {
  size_t count = 0, cap = pick_cap(in, st.m.live_count());
  std::vector<metrale_allocation_t> out(cap);
  Want w = cap && cap < st.m.live_count() ? want_status(METRALE_ERROR_BUFFER_TOO_SMALL) : want_ok();
  expect(metrale_live_allocations(st.ctx, cap ? out.data() : nullptr, cap, &count), w,
         "live_allocations");
  if (count != st.m.live_count()) violated("live_allocations count", "ledger", METRALE_OK);
  size_t j = 0;
  for (const Alloc& a : st.m.allocs) {
    if (!a.ledger) continue;
    if (j >= cap || j >= count) break;
    const metrale_allocation_t& e = out[j++];
    if (e.ptr != a.ptr || e.bytes != a.bytes || e.seq != a.seq || e.kind != a.kind ||
        e.redzone_bytes != a.pad)
      violated("live_allocations entry differs (order or fields)", "ledger", METRALE_OK);
    readable(e.file, "allocation site");
  }
}

void report(State& st, Bytes& in) {
  size_t top = in.pick(4), min_mib = in.pick(3) == 0 ? in.pick(3) : 0, needed = 0;
  expect(metrale_alloc_report(st.ctx, top, min_mib, nullptr, 0, &needed), want_ok(), "report size");
  if (needed == 0) violated("report needs 0 bytes", "report", METRALE_OK);
  size_t len = in.pick(3) == 0 ? in.pick(needed + 1) : needed + in.pick(8);
  std::vector<char> buf(len ? len : 1);
  size_t again = 0;
  Want w = len && len < needed ? want_status(METRALE_ERROR_BUFFER_TOO_SMALL) : want_ok();
  metrale_status_t s = expect(
      metrale_alloc_report(st.ctx, top, min_mib, len ? buf.data() : nullptr, len, &again), w,
      "alloc_report");
  if (again != needed) violated("report size changed", "report", s);
  if (len && std::memchr(buf.data(), 0, len) == nullptr) violated("report not NUL-ended", "report", s);
  if (s == METRALE_OK && len && std::strlen(buf.data()) + 1 != needed)
    violated("report length is not needed - 1", "report", s);
}

void scan(State& st, Bytes& in) {
  size_t dirty = 0, unknown = 0;
  for (const Alloc& a : st.m.allocs) {
    if (!a.ledger || a.pad == 0) continue;
    dirty += a.pad_state == Pad::Dirty;
    unknown += a.pad_state == Pad::Unknown;
  }
  // Freed pads the scan's check of waiting blocks reports. A block freed on
  // a stream that captures now waits for a later check: then none is owed.
  bool any_capture = false;
  for (metrale_stream_t* sp : st.streams) any_capture |= metrale_stream_is_capturing(st.ctx, sp) != 0;
  for (const FreedPad& f : st.m.freed_pads) {
    if (f.required && !any_capture) dirty++;
    else unknown++;
  }
  size_t cap = pick_cap(in, dirty + unknown), count = 0;
  std::vector<metrale_redzone_violation_t> out(cap);
  metrale_status_t s = metrale_redzone_scan(st.ctx, cap ? out.data() : nullptr, cap, &count);
  if (st.m.lost) return (void)expect(s, want_any(), "redzone_scan");
  // The scan reads the pads on the default stream: refused while it captures.
  // Freed pads found by earlier checks were read back then: reported.
  if (metrale_stream_is_capturing(st.ctx, nullptr)) {
    for (FreedPad& f : st.m.freed_pads) f.required = false;
    if (s == METRALE_ERROR_REDZONE_CORRUPTED && !st.m.freed_pads.empty()) return;
    return (void)expect(s, want_ok_or(METRALE_ERROR_CAPTURE), "redzone_scan while capturing");
  }
  expect(s, count ? want_status(METRALE_ERROR_REDZONE_CORRUPTED) : want_ok(), "redzone_scan");
  if (count < dirty || count > dirty + unknown) {
    std::fprintf(stderr, "scan found %zu, model: %zu dirty, %zu unknown\n", count, dirty, unknown);
    violated("red-zone scan count", "redzone_scan", s);
  }
  std::vector<bool> listed(st.m.freed_pads.size(), false);
  for (size_t i = 0; i < cap && i < count; ++i) {
    const metrale_redzone_violation_t& v = out[i];
    // A freed pad (the check reports the pad only, as a scan does).
    size_t k = 0;
    while (k < st.m.freed_pads.size() &&
           (st.m.freed_pads[k].ptr != v.ptr || st.m.freed_pads[k].seq != v.seq || listed[k]))
      ++k;
    if (k < st.m.freed_pads.size()) {
      const FreedPad& f = st.m.freed_pads[k];
      listed[k] = true;
      if (v.bytes != f.bytes || v.first_bad_offset >= f.pad || v.bad_bytes == 0 || v.bad_bytes > f.pad ||
          v.expected != METRALE_REDZONE_PATTERN || v.found == METRALE_REDZONE_PATTERN)
        violated("freed red-zone violation entry", "redzone_scan", s);
      readable(v.file, "violation site");
      continue;
    }
    Alloc* a = st.m.find_at(v.ptr);
    if (!a || !a->ledger || a->pad_state == Pad::Clean || v.bytes != a->bytes ||
        v.seq != a->seq || v.first_bad_offset >= a->pad || v.bad_bytes == 0 ||
        v.bad_bytes > a->pad || v.expected != METRALE_REDZONE_PATTERN ||
        v.found == METRALE_REDZONE_PATTERN)
      violated("red-zone violation entry", "redzone_scan", s);
    readable(v.file, "violation site");
    a->pad_state = Pad::Dirty;
    a->scan_reported = Pad::Dirty;
  }
  if (cap >= count) {  // every corrupted pad was listed: the others are clean
    for (Alloc& a : st.m.allocs)
      if (a.ledger && a.pad && a.pad_state == Pad::Unknown) a.pad_state = Pad::Clean;
    // Freed pads: reported once; unlisted ones were clean or still wait.
    std::vector<FreedPad> keep;
    for (size_t k = 0; k < st.m.freed_pads.size(); ++k) {
      if (listed[k] || !any_capture) continue;
      FreedPad f = st.m.freed_pads[k];
      f.required = false;
      keep.push_back(f);
    }
    st.m.freed_pads.swap(keep);
  } else {
    // Not all listed: which live pads the scan found is unknown, and which
    // freed ones it reported too (they are not reported again).
    for (Alloc& a : st.m.allocs)
      if (a.ledger && a.pad && a.pad_state != Pad::Clean && a.scan_reported != Pad::Dirty)
        a.scan_reported = Pad::Unknown;
    std::vector<FreedPad> keep;
    for (size_t k = 0; k < st.m.freed_pads.size(); ++k) {
      if (listed[k]) continue;
      FreedPad f = st.m.freed_pads[k];
      f.required = false;
      keep.push_back(f);
    }
    st.m.freed_pads.swap(keep);
  }
}

void poison(State& st, Bytes& in) {
  uint64_t lo = in.pick(40), hi = in.pick(5) == 0 ? in.u64() : lo + in.pick(40);
  if (in.pick(8) == 0) std::swap(lo, hi);
  Want w = lo > hi ? want_status(METRALE_ERROR_INVALID_ARGUMENT) : unless_lost_ok(st);
  if (metrale_stream_is_capturing(st.ctx, nullptr)) w = want_any();
  if (expect(metrale_redzone_poison(st.ctx, lo, hi), w, "redzone_poison") != METRALE_OK) return;
  // A repaired pad's later overrun is news to the free's check again.
  for (Alloc& a : st.m.allocs)
    if (a.ledger && a.seq >= lo && a.seq < hi) a.scan_reported = Pad::Clean;
  if (metrale_stream_is_capturing(st.ctx, nullptr)) {  // recorded, not run: pads unknown
    for (Alloc& a : st.m.allocs)
      if (a.ledger && a.pad) a.pad_state = Pad::Unknown;
    return;
  }
  for (Alloc& a : st.m.allocs)
    if (a.ledger && a.seq >= lo && a.seq < hi) a.pad_state = Pad::Clean;
}

void sweep(State& st, Bytes& in) {
  if (in.pick(4) != 0) return;  // rare: it empties the ledger
  size_t count = 99;
  size_t* out = in.pick(4) == 0 ? nullptr : &count;
  if (expect(metrale_sweep_unreleased(st.ctx, out), want_any(), "sweep_unreleased") != METRALE_OK)
    return;
  if (out && count != st.m.live_count()) violated("sweep count", "sweep", METRALE_OK);
  for (size_t i = st.m.allocs.size(); i-- > 0;) {
    if (!st.m.allocs[i].ledger) continue;
    st.m.note_freed(st.m.allocs[i]);
    st.m.freed.push_back(st.m.allocs[i].ptr);
    st.m.allocs.erase(st.m.allocs.begin() + static_cast<long>(i));
  }
}

void counters(State& st, Bytes& in, bool reset) {
  if (reset) {
    expect(metrale_counters_reset(st.ctx), want_ok(), "counters_reset");
    st.allocs_since_reset = st.alloc_bytes_since_reset = 0;
  }
  metrale_counters_t c;
  std::memset(&c, 0xee, sizeof c);
  c.struct_size = in.pick(6) == 0 ? in.pick(2 * sizeof c) : sizeof c;
  // The layout before timings_dropped is still served.
  const bool known = c.struct_size == sizeof c ||
                     c.struct_size == offsetof(metrale_counters_t, timings_dropped);
  Want w = known ? want_ok() : want_status(METRALE_ERROR_INVALID_ARGUMENT);
  if (expect(metrale_counters(st.ctx, &c), w, "counters") != METRALE_OK) return;
  if (c.allocs != st.allocs_since_reset || c.alloc_bytes != st.alloc_bytes_since_reset)
    violated("counters.allocs/alloc_bytes", "counters", METRALE_OK);
}

template <class T, class F>
void read_table(State& st, Bytes& in, F fn, const char* what, void (*each)(const T&)) {
  size_t count = 0;
  expect(fn(st.ctx, nullptr, 0, &count), unless_lost_ok(st), what);
  size_t cap = pick_cap(in, count), got = 0;
  std::vector<T> out(cap);
  Want w = cap && cap < count ? want_status(METRALE_ERROR_BUFFER_TOO_SMALL) : want_ok();
  if (expect(fn(st.ctx, cap ? out.data() : nullptr, cap, &got), unless_lost(st, w), what) != 0 &&
      st.m.lost)
    return;
  if (got != count) violated("table count changed between two reads", what, METRALE_OK);
  for (size_t i = 0; i < cap && i < got; ++i) each(out[i]);
}

void trace_entry(const metrale_trace_entry_t& e) {
  if (e.kind == METRALE_TRACE_LAUNCH) readable(e.kernel, "trace kernel");
  if (e.nargs > METRALE_TRACE_MAX_ARGS) violated("trace nargs > 8", "trace", METRALE_OK);
}
void audit_entry(const metrale_kernel_audit_entry_t& e) {
  readable(e.module, "audit module");
  readable(e.function, "audit function");
  readable(e.file, "audit file");
  if (e.found != 0 && e.found != 1) violated("audit found not 0/1", "audit", METRALE_OK);
}
void timing_entry(const metrale_kernel_timing_t& e) {
  readable(e.kernel, "timing kernel");
  if (!(e.total_ms >= 0) || !std::isfinite(e.total_ms) || e.launches == 0)
    violated("timing entry", "timings", METRALE_OK);
}

void foreign(State& st, Bytes& in) {
  metrale_context_t* o = st.other;
  if (!st.m.allocs.empty()) {
    const Alloc& a = st.m.allocs[in.pick(st.m.allocs.size())];
    expect(a.ledger ? metrale_free(o, a.ptr) : metrale_free_arena(o, a.ptr), want_fail(),
           "free in another context");
  }
  if (!st.m.pinned.empty())
    expect(metrale_host_free_pinned(o, st.m.pinned[0].ptr), want_fail(), "foreign free_pinned");
  if (!st.streams.empty()) {
    metrale_stream_t* s = st.streams[in.pick(st.streams.size())];
    expect(metrale_stream_destroy(o, s), want_fail(), "foreign stream_destroy");
    expect(metrale_stream_synchronize(o, s), want_fail(), "foreign stream_synchronize");
  }
  if (!st.events.empty())
    expect(metrale_event_destroy(o, st.events[0].e), want_fail(), "foreign event_destroy");
  if (!st.graphs.empty())
    expect(metrale_graph_launch(o, st.graphs[0], nullptr), want_fail(), "foreign graph_launch");
  expect(metrale_launch(o, st.touch, {1, 1, 1}, {1, 1, 1}, 0, nullptr, nullptr), want_fail(),
         "foreign launch");
  size_t n = 1;
  expect(metrale_live_count(o, &n), want_ok(), "foreign live_count");
  if (n != 0) violated("the other context's ledger is not empty", "foreign", METRALE_OK);
}

void device(State& st) {
  metrale_device_info_t info;
  std::memset(&info, 0x7f, sizeof info);
  if (expect(metrale_device_info(st.ctx, &info), unless_lost_ok(st), "device_info") == 0) {
    if (!std::memchr(info.name, 0, sizeof info.name)) violated("device name", "info", METRALE_OK);
    if (info.backend != METRALE_BACKEND_HOST) violated("device backend", "info", METRALE_OK);
  }
  size_t n = 0;
  expect(metrale_total_memory(st.ctx, &n), unless_lost_ok(st), "total_memory");
  expect(metrale_free_memory(st.ctx, &n), unless_lost_ok(st), "free_memory");
  expect(metrale_device_free_memory(st.ctx, &n), unless_lost_ok(st), "device_free_memory");
  expect(metrale_chunk_slack_bytes(st.ctx, &n), want_ok(), "chunk_slack_bytes");
  if (metrale_context_backend(st.ctx) != METRALE_BACKEND_HOST)
    violated("context_backend", "device", METRALE_OK);
}

void misc(State& st, Bytes& in) {
  readable(metrale_status_name(static_cast<metrale_status_t>(static_cast<int>(in.u32()))),
           "status_name");
  int major = -1;
  expect(metrale_version(&major, nullptr, nullptr), want_ok(), "version");
  if (major != METRALE_VERSION_MAJOR) violated("version", "version", METRALE_OK);
  int level = static_cast<int>(in.pick(9)) - 1;
  Want w = level < 0 || level > METRALE_LOG_OFF ? want_status(METRALE_ERROR_INVALID_ARGUMENT)
                                                : want_ok();
  expect(metrale_log_set_level(static_cast<metrale_log_level_t>(level)), w, "log_set_level");
  expect(metrale_context_bind_thread(st.ctx), unless_lost_ok(st), "bind_thread");
  expect(metrale_context_fault(st.ctx),
         st.m.lost ? want_status(METRALE_ERROR_CONTEXT_LOST) : want_ok(), "context_fault");
}

}  // namespace

void check_ledger(State& st, const char* after) {
  size_t count = 0, bytes = 0;
  expect(metrale_live_count(st.ctx, &count), want_ok(), "live_count");
  expect(metrale_live_bytes(st.ctx, &bytes), want_ok(), "live_bytes");
  if (count != st.m.live_count() || bytes != st.m.live_bytes()) {
    std::fprintf(stderr, "ledger %zu/%zu bytes, model %zu/%zu bytes\n", count, bytes,
                 st.m.live_count(), st.m.live_bytes());
    violated("ledger differs from the harness's account", after, METRALE_OK);
  }
}

void op_query(State& st, Bytes& in, unsigned which) {
  switch (which) {
    case 0: compare_listing(st, in); break;
    case 1: report(st, in); break;
    case 2: scan(st, in); break;
    case 3: poison(st, in); break;
    case 4: sweep(st, in); break;
    case 5: counters(st, in, false); break;
    case 6: counters(st, in, true); break;
    case 7:
      if (in.pick(3) == 0) expect(metrale_launch_trace_enable(st.ctx, in.pick(2)), want_ok(), "trace_enable");
      read_table<metrale_trace_entry_t>(st, in, metrale_launch_trace_read, "launch_trace_read",
                                        trace_entry);
      break;
    case 8:
      read_table<metrale_kernel_audit_entry_t>(st, in, metrale_kernel_audit_read,
                                               "kernel_audit_read", audit_entry);
      break;
    case 9:
      if (in.pick(3) == 0) expect(metrale_kernel_timing_enable(st.ctx, in.pick(2)), want_ok(), "timing_enable");
      read_table<metrale_kernel_timing_t>(st, in, metrale_kernel_timings_read, "kernel_timings_read",
                                          timing_entry);
      break;
    case 10: foreign(st, in); break;
    case 11: device(st); break;
    case 12: misc(st, in); break;
    default: compare_listing(st, in); break;
  }
}

}  // namespace fuzz
