// The process's live contexts, by handle value (a metrale_context_t* that a
// caller holds is a handle value, never the context's address; see
// handle_id.hpp). One SlotTable for the whole process: a destroyed
// context's value is never accepted again, whatever lands at its address.
//
// fork(): a pthread_atfork child handler kills every context created before
// the fork, for good (the driver's state does not survive fork); the child
// may create new contexts.
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>

#include "core/slot_table.hpp"

struct metrale_context;

namespace metrale::core {

// Registers ctx and returns its new handle value. OUT_OF_MEMORY when 2^20
// contexts are live.
uint64_t register_context(metrale_context* ctx);

namespace registry_detail {
struct ContextEntry {
  metrale_context* ctx = nullptr;
  uint64_t killed_by_fork = 0;  // the serial it had when this process forked from its parent
};
using ContextTable = SlotTable<ContextEntry>;
// The process's table, published by its first use (context_registry.cpp)
// and never destroyed; nullptr until then, when no handle is live anyway.
extern std::atomic<ContextTable*> g_table;
}  // namespace registry_detail

namespace registry_detail {
// This thread's last successful lookup: confirmed by one load of the slot's
// serial (SlotTable::find_cached), so a destroyed context is never returned.
// Initial-exec TLS: one load off the thread pointer (see tags.hpp).
struct alignas(32) LastLookup {  // one cache line
  uint64_t handle;
  const std::atomic<uint64_t>* serial;  // never nullptr (kNoSerial at first)
  metrale_context* ctx;
};
extern const std::atomic<uint64_t> kNoSerial;  // always 0: no handle matches
// Inline with its constant initializer: no TLS init check per read
// (thread_slot.hpp).
inline thread_local LastLookup t_last __attribute__((tls_model("initial-exec"))) = {
    0, &kNoSerial, nullptr};
metrale_context* find_context_slow(uint64_t handle) noexcept;
}  // namespace registry_detail

// The live context behind a handle value, or nullptr. Lock-free and inline:
// every call of the API starts here (out of line it was a tenth of a
// pooled alloc+free pair: a call, a function-static guard, the lookup).
// A handle the thread looked up last costs a compare and a load.
inline metrale_context* find_context(uint64_t handle) noexcept {
  const registry_detail::LastLookup& last = registry_detail::t_last;
  if (last.handle == handle &&
      last.serial->load(std::memory_order_acquire) == handle_id::serial_of(handle) &&
      handle_id::serial_of(handle) != 0) {
    return last.ctx;
  }
  return registry_detail::find_context_slow(handle);
}

// Unregisters: the context to destroy, or nullptr when the value is not a
// live context (of two racing calls, one gets it).
metrale_context* take_context(uint64_t handle) noexcept;

// Why a value is not a live context, for the message (cold path).
std::string not_a_live_context(uint64_t handle);

// Runs fn on every live context, in slot order: the process-wide ledger
// report. A context is pinned while fn reads it: take_context unregisters
// it at once but returns only once no fn runs on it (so it is never
// deleted under fn). fn must not create or destroy a context. fn may
// throw; the pin is then released.
void for_each_context(const std::function<void(metrale_context&)>& fn);

// Runs fn on the live context behind handle, pinned as for_each_context
// pins it (a racing take_context returns only once fn is done); false, fn
// not run, when the value is not a live context. The same rules for fn.
bool with_context(uint64_t handle, const std::function<void(metrale_context&)>& fn);

}  // namespace metrale::core
