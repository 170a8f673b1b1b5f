#include "core/context_registry.hpp"

#include <pthread.h>

#include <cinttypes>
#include <cstdio>
#include <mutex>
#include <shared_mutex>

#include "core/slot_table.hpp"

namespace metrale::core {
namespace {

struct ContextEntry {
  metrale_context* ctx = nullptr;
  uint64_t killed_by_fork = 0;  // the serial it had when this process forked from its parent
};

// Never destroyed: a context handle may still be looked up from an atexit
// handler or a thread that outlives main.
SlotTable<ContextEntry>& contexts() {
  static auto* table = new SlotTable<ContextEntry>("context");
  return *table;
}

// Held shared by for_each_context, exclusive by take_context: a context
// being walked is never unregistered (and so never deleted) under the walk.
// Never destroyed, as the table.
std::shared_mutex& walk_mutex() {
  static auto* m = new std::shared_mutex;
  return *m;
}

void fork_prepare() {
  walk_mutex().lock();
  contexts().fork_prepare();
}
void fork_parent() {
  contexts().fork_parent();
  walk_mutex().unlock();
}
// The child keeps the parent's memory but not its driver state (a CUDA
// context does not survive fork): every context of the parent is dead here.
// Its memory is left alone; freeing it would call into that driver state.
void fork_child() {
  contexts().fork_child([](ContextEntry& e, uint64_t serial) { e.killed_by_fork = serial; });
  walk_mutex().unlock();
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(fork_prepare, fork_parent, fork_child); });
}

}  // namespace

uint64_t register_context(metrale_context* ctx) {
  install_fork_handlers();
  return contexts().insert([&](ContextEntry& e) { e.ctx = ctx; });
}

metrale_context* find_context(uint64_t handle) noexcept {
  const ContextEntry* e = contexts().find(handle);
  return e != nullptr ? e->ctx : nullptr;
}

metrale_context* take_context(uint64_t handle) noexcept {
  std::unique_lock<std::shared_mutex> no_walk(walk_mutex());
  metrale_context* out = nullptr;
  contexts().erase(handle, [&](ContextEntry& e) { out = e.ctx; });
  return out;
}

void for_each_context(const std::function<void(metrale_context&)>& fn) {
  std::shared_lock<std::shared_mutex> walking(walk_mutex());
  for (ContextEntry* e : contexts().live()) {
    if (e->ctx != nullptr) fn(*e->ctx);
  }
}

std::string not_a_live_context(uint64_t handle) {
  char hex[32];
  std::snprintf(hex, sizeof hex, "0x%" PRIx64, handle);
  const ContextEntry* e = contexts().any_slot(handle);
  if (e != nullptr && e->killed_by_fork != 0 && e->killed_by_fork == handle_id::serial_of(handle)) {
    return std::string("ctx ") + hex +
           " was created before fork() in the parent process: the driver's state does not "
           "survive fork, so it is unusable in the child for good; create a new context";
  }
  return std::string("ctx ") + hex +
         " is not a live context (destroyed, or never returned by metrale_context_create)";
}

}  // namespace metrale::core
