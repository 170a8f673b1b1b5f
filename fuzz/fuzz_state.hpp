// One fuzz run's state: the contexts, the handles the harness made, the
// model, and the status checks every call goes through.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "fuzz_model.hpp"

namespace fuzz {

// Static host buffers: copies that the library wrongly lets run past their
// ends hit ASan's guard after them. Device ranges the harness makes valid
// are never longer than kHostBuf.
constexpr size_t kMaxAlloc = 16384;
constexpr size_t kHostBuf = 4 * kMaxAlloc;

struct Event {
  metrale_event_t* e = nullptr;
  bool timing = true;
  int recorded = 0;  // 0 never, 1 outside capture, 2 unknown (in a capture)
};

struct RandKernel {
  metrale_kernel_t* k = nullptr;
  std::string module;
  std::vector<size_t> sizes;
  size_t total = 0;
  bool alive = true;
};

struct State {
  metrale_context_t* ctx = nullptr;
  metrale_context_t* other = nullptr;  // a second context: foreign handles must be refused
  Model m;
  std::vector<metrale_stream_t*> streams, dead_streams;
  std::vector<Event> events;
  std::vector<metrale_event_t*> dead_events;
  std::vector<metrale_graph_t*> graphs, dead_graphs;
  metrale_kernel_t* touch = nullptr;  // fz::touch(ptr u64, len u64, value u32)
  metrale_kernel_t* raw = nullptr;    // fz::raw, parameter sizes unknown
  metrale_kernel_t* fault = nullptr;  // fz::fault, simulates a sticky fault
  std::vector<std::unique_ptr<RandKernel>> rand_kernels;
  bool touch_alive = true;
  unsigned modules_made = 0;
  // Counter expectations since the last reset.
  uint64_t allocs_since_reset = 0, alloc_bytes_since_reset = 0;
};

// --- status checks ----------------------------------------------------------

// Every status is one of the enum, never INTERNAL, and a failure has a message.
inline void check(metrale_status_t s, const char* what) {
  if (static_cast<int>(s) < 0 || static_cast<int>(s) > METRALE_ERROR_INTERNAL)
    violated("status outside the enum", what, s);
  if (s == METRALE_ERROR_INTERNAL) violated("INTERNAL status", what, s);
  if (std::strcmp(metrale_status_name(s), "METRALE_UNKNOWN_STATUS") == 0)
    violated("status without a name", what, s);
  if (s != METRALE_OK) {
    const char* msg = metrale_last_error_message();
    if (msg == nullptr || msg[0] == '\0') violated("failure without a message", what, s);
  }
}

// What a call must answer.
struct Want {
  enum Kind { Ok, Fail, FailWith, OkOrFailWith, Any } kind = Ok;
  metrale_status_t status = METRALE_OK;
};
inline Want want_ok() { return {Want::Ok, METRALE_OK}; }
inline Want want_fail() { return {Want::Fail, METRALE_OK}; }
inline Want want_status(metrale_status_t s) {
  return s == METRALE_OK ? want_ok() : Want{Want::FailWith, s};
}
inline Want want_ok_or(metrale_status_t s) { return {Want::OkOrFailWith, s}; }
inline Want want_any() { return {Want::Any, METRALE_OK}; }

// The stricter of two: a failure demanded by either wins.
inline Want combine(Want a, Want b) {
  auto rank = [](Want w) {
    switch (w.kind) {
      case Want::FailWith: return 4;
      case Want::Fail: return 3;
      case Want::Any: return 2;
      case Want::OkOrFailWith: return 1;
      case Want::Ok: return 0;
    }
    return 0;
  };
  if (a.kind == Want::FailWith && b.kind == Want::FailWith && a.status != b.status)
    return want_fail();
  return rank(a) >= rank(b) ? a : b;
}

// Checks s against w; returns s.
inline metrale_status_t expect(metrale_status_t s, Want w, const char* what) {
  static const bool trace = std::getenv("FUZZ_TRACE") != nullptr;  // see fuzz_abi.cpp
  if (trace) std::fprintf(stderr, "  %s: %s\n", what, metrale_status_name(s));
  check(s, what);
  switch (w.kind) {
    case Want::Ok:
      if (s != METRALE_OK) violated("expected OK", what, s);
      break;
    case Want::Fail:
      if (s == METRALE_OK) violated("expected a failure", what, s);
      break;
    case Want::FailWith:
      if (s != w.status) violated(metrale_status_name(w.status), what, s);
      break;
    case Want::OkOrFailWith:
      if (s != METRALE_OK && s != w.status) violated(metrale_status_name(w.status), what, s);
      break;
    case Want::Any:
      break;
  }
  return s;
}

// What a device range [p, p+n) must get from a copy or memset.
inline Want want_for_range(Model& m, uint64_t p, uint64_t n) {
  if (n == 0) return m.lost ? want_ok_or(METRALE_ERROR_CONTEXT_LOST) : want_ok();
  switch (m.where(p, n)) {
    case Where::Inside:
      return m.lost ? want_status(METRALE_ERROR_CONTEXT_LOST) : want_ok();
    case Where::Pinned:
      return m.lost ? want_fail() : want_any();
    case Where::Slack:
      if (m.checked) return want_status(METRALE_ERROR_OUT_OF_BOUNDS);
      return m.lost ? want_fail() : want_ok_or(METRALE_ERROR_INVALID_ARGUMENT);
    case Where::Outside:
      if (m.lost) return want_fail();
      // Pool memory no allocation owns (rule 9): only checked pointers know.
      if (m.pooled && !m.checked) {
        m.stray = true;  // it may land in a freed pad or a checked pattern range
        return want_ok_or(METRALE_ERROR_INVALID_ARGUMENT);
      }
      return want_status(m.checked ? METRALE_ERROR_OUT_OF_BOUNDS
                                   : METRALE_ERROR_INVALID_ARGUMENT);
  }
  return want_any();
}

// A stream argument the driver chose.
struct StreamPick {
  metrale_stream_t* s = nullptr;
  bool dead = false;
  bool capturing = false;
};

// Weakens w for the stream: a dead stream must fail; a capturing one may
// refuse what would otherwise run (but never accept a bad range).
inline Want for_stream(Want w, const StreamPick& sp) {
  if (sp.dead) return want_fail();
  if (sp.capturing) return (w.kind == Want::Fail || w.kind == Want::FailWith) ? want_fail()
                                                                              : want_any();
  return w;
}

inline Want unless_lost(const State& st, Want w) { return st.m.lost ? want_any() : w; }
inline Want unless_lost_ok(const State& st) { return unless_lost(st, want_ok()); }

// --- the ops, by area ---------------------------------------------------------

StreamPick pick_stream(State& st, Bytes& in);
uint64_t pick_device_ptr(State& st, Bytes& in);
uint64_t pick_length(Bytes& in, uint64_t room);
void check_ledger(State& st, const char* after);

void op_memory(State& st, Bytes& in, unsigned which);
void op_copy(State& st, Bytes& in, unsigned which);
void op_work(State& st, Bytes& in, unsigned which);
void op_kernel(State& st, Bytes& in, unsigned which);
void op_query(State& st, Bytes& in, unsigned which);

constexpr unsigned kMemoryOps = 15, kCopyOps = 12, kWorkOps = 16, kKernelOps = 8, kQueryOps = 14;

void setup_kernels(State& st);
metrale_status_t touch_kernel(const metrale_host_kernel_call_t* call, void* user);

}  // namespace fuzz
