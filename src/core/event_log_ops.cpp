// The event log's calls on a context: open/close/flush, METRALE_EVENT_LOG,
// and the slow halves of the hooks (context.hpp holds their one-branch
// inline fronts; memory.cpp, redzone.cpp and quarantine_ops.cpp call them).
#include <cstdlib>
#include <string>

#include "core/context.hpp"
#include "core/tags.hpp"

using metrale::Error;
using metrale::core::EventMem;
using metrale::core::EventPoolState;
using metrale::core::EventScanFinding;

namespace metrale::core {

std::shared_ptr<EventSink> event_log_from_env() {
  const char* path = std::getenv("METRALE_EVENT_LOG");
  if (path == nullptr || *path == '\0') return nullptr;
  try {
    return EventSink::open(path);
  } catch (const Error& e) {
    throw Error(e.status(), std::string("METRALE_EVENT_LOG: ") + e.what());
  }
}

}  // namespace metrale::core

metrale::core::EventLogHeader metrale_context::event_header(uint64_t handle) const {
  metrale::core::EventLogHeader h;
  h.ctx = handle;
  h.backend = backend_->kind() == METRALE_BACKEND_CUDA ? "cuda" : "host";
  h.device = opts_.device;
  h.pool = pool_ != nullptr;
  h.redzone = opts_.redzone_bytes;
  return h;
}

void metrale_context::event_log_open(const char* path, uint64_t handle) {
  event_log_.open(path, event_header(handle));
}

EventPoolState metrale_context::event_pool_state() const {
  EventPoolState s;
  if (!pool_) return s;
  const metrale::core::pool::PoolStats p = pool_->totals();  // takes the ledger's lock
  s.enabled = true;
  s.reserved = p.reserved;
  s.in_use = p.in_use;
  s.cached = p.cached;
  return s;
}

uint64_t metrale_context::event_stream(const metrale::core::StreamObj* st) {
  return st == nullptr || st->is_default ? 0 : st->id;
}

metrale_context::DevPtr metrale_context::alloc_logged(size_t bytes, const char* file, int line,
                                                      metrale_alloc_kind_t kind,
                                                      metrale_stream* s, bool wait_for_fill) {
  EventMem m;
  m.bytes = bytes;
  m.kind = kind;
  m.file = file != nullptr ? file : "<unknown>";
  m.line = line;
  // The thread's tag now is the one the ledger entry gets (Ledger::record_locked).
  m.tag = metrale::core::tags::name(metrale::core::tags::current());
  // The caller's value as given (no lookup, nothing to throw here): the
  // alloc checks it, and an alloc that got this far had a live stream.
  m.stream = s == nullptr || s == default_stream_id_ ? 0 : metrale::core::handle_id::value_of(s);
  metrale::core::EventLog::Ticket tk;
  try {
    m.ptr = alloc_unlogged(bytes, file, line, kind, s, wait_for_fill, &tk);
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_OUT_OF_MEMORY) event_log_.oom(m, event_pool_state());
    throw;
  }
  event_log_.alloc(tk, m, event_pool_state());
  return m.ptr;
}

void metrale_context::log_free_slow(metrale::core::EventLog::Ticket tk,
                                    const metrale::core::LedgerEntry& e, DevPtr ptr,
                                    const metrale::core::StreamObj* st, const char* file,
                                    int line, bool sweep) {
  EventMem m;
  m.stream = event_stream(st);
  m.bytes = e.bytes;
  m.ptr = ptr;
  m.kind = e.kind;
  m.file = ledger_.site_file(e.site);
  m.line = ledger_.site_line(e.site);
  m.free_file = file;
  m.free_line = line;
  m.sweep = sweep;
  m.tag = metrale::core::tags::name(e.tag);
  event_log_.free(tk, m, event_pool_state());
}

void metrale_context::log_scan_slow(const std::vector<metrale_redzone_violation_t>& found) {
  std::vector<EventScanFinding> f;
  for (size_t i = 0; i < found.size() && i < metrale::core::EventLog::kMaxScanFindings; ++i) {
    const auto& v = found[i];
    f.push_back({v.ptr, v.bytes, v.file, v.line, v.first_bad_offset});
  }
  event_log_.scan("redzone", found.size(), f, event_pool_state());
}

void metrale_context::log_scan_slow(const std::vector<metrale_use_after_free_t>& found) {
  std::vector<EventScanFinding> f;
  for (size_t i = 0; i < found.size() && i < metrale::core::EventLog::kMaxScanFindings; ++i) {
    const auto& u = found[i];
    f.push_back({u.ptr, u.bytes, u.alloc_file, u.alloc_line, u.first_bad_offset});
  }
  event_log_.scan("quarantine", found.size(), f, event_pool_state());
}
