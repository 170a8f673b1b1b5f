// The allocation event log of one context: every alloc, free, failed
// (out-of-memory) alloc and scan as one JSON line, the format documented in
// docs/event-log.md and include/metrale_gpu.h ("The event log").
//
// Cost: while no log is open every hook is one relaxed atomic load and a
// predictable branch (on()). While one is open, a line is formatted into a
// buffer on the stack (the heap for a line too long for it) and appended to
// the file's EventSink under the sink's lock; pool state is sampled by the
// caller.
//
// Order: each event takes a number (seq) from a per-context counter. An
// alloc takes it (ticket()) under the ledger's lock as its entry is
// recorded, after its memory was handed out; a free or sweep takes it under
// that lock as it takes the entry off, before the memory can be handed out
// again. So for one address, seq orders its alloc, free and next alloc as
// they happened, even when threads' lines reach the file in another order
// or a sweep frees an allocation whose call has not returned; readers sort
// by seq.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/event_sink.hpp"
#include "metrale_gpu.h"

namespace metrale::core {

// The caching pool's figures at an event; enabled = false: the pool is off.
struct EventPoolState {
  bool enabled = false;
  size_t reserved = 0;
  size_t in_use = 0;
  size_t cached = 0;
};

// What the first line of a log (per context) says about the context.
struct EventLogHeader {
  uint64_t ctx = 0;  // the context's handle value
  const char* backend = "host";
  int device = 0;
  bool pool = false;
  size_t redzone = 0;
};

// One violation a scan found (up to kMaxScanFindings are written per line).
struct EventScanFinding {
  uint64_t ptr;
  size_t bytes;
  const char* file;
  int line;
  size_t first_bad_offset;
};

// One alloc, free or failed alloc. stream: the caller's stream handle value
// (0: the default stream).
struct EventMem {
  uint64_t stream = 0;
  size_t bytes = 0;
  uint64_t ptr = 0;
  metrale_alloc_kind_t kind = METRALE_ALLOC_DEVICE;
  const char* file = nullptr;  // the allocation's site
  int line = 0;
  const char* free_file = nullptr;  // frees: the free's site (nullptr: none given)
  int free_line = 0;
  bool sweep = false;  // frees: by metrale_sweep_unreleased / context destroy
  const char* tag = nullptr;  // the allocation's tag (metrale_tag_push); nullptr: none
};

class EventLog {
 public:
  static constexpr size_t kMaxScanFindings = 16;

  // Whether a log is open: the hooks' one branch.
  bool on() const noexcept { return on_.load(std::memory_order_relaxed); }

  // Opens path (shared with other contexts of this process logging to the
  // same file; truncated when none is) and writes the "open" line.
  // INVALID_ARGUMENT when a log is already open here or path cannot be
  // opened. open, attach, close and flush are thread-safe (one mutex).
  void open(const std::string& path, const EventLogHeader& header);
  // The same with a sink already opened (METRALE_EVENT_LOG, opened before
  // the context is published so that a bad path fails the create). Never
  // throws; a log already open here is kept and sink dropped.
  void attach(std::shared_ptr<EventSink> sink, const EventLogHeader& header) noexcept;
  // Writes the "close" line, flushes, lets go of the file. No-op when
  // closed. INTERNAL (closed all the same) when lines were lost to write
  // errors.
  void close();
  // Writes buffered lines out. INTERNAL when lines were lost; no-op closed.
  void flush();

  struct Ticket {
    uint64_t seq = 0;
    uint64_t t_ns = 0;
  };
  // A number and time for an event whose line is written later (a free);
  // {0, 0} while off. Never throws.
  Ticket ticket() noexcept {
    if (!on()) return {};
    return take_ticket();
  }

  // The lines. Never throw: a line that cannot be written is counted lost.
  // t: taken as the entry was recorded ({0, 0}: a number is taken now).
  void alloc(Ticket t, const EventMem& m, const EventPoolState& pool) noexcept;
  void free(Ticket t, const EventMem& m, const EventPoolState& pool) noexcept;
  void oom(const EventMem& m, const EventPoolState& pool) noexcept;
  // scan: "redzone" or "quarantine"; violations: how many were found in
  // all (findings may hold fewer).
  void scan(const char* scan, size_t violations, const std::vector<EventScanFinding>& findings,
            const EventPoolState& pool) noexcept;

 private:
  Ticket take_ticket() noexcept;
  void attach_locked(std::shared_ptr<EventSink> sink, const EventLogHeader& header) noexcept;
  void mem_line(const char* ev, Ticket t, const EventMem& m, const EventPoolState& pool) noexcept;
  void emit(const char* line, size_t n) noexcept;

  std::mutex admin_mu_;  // open / attach / close / flush
  std::atomic<bool> on_{false};
  std::shared_ptr<EventSink> sink_;  // read and written with std::atomic_load/store
  std::atomic<uint64_t> seq_{0};
  std::atomic<uint64_t> ctx_{0};  // the same value at every open; atomic for the readers
};

// Monotonic time in nanoseconds (CLOCK_MONOTONIC), the logs' clock.
uint64_t event_clock_ns() noexcept;

}  // namespace metrale::core
