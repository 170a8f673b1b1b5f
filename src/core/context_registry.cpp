#include "core/context_registry.hpp"

#include <pthread.h>

#include <cinttypes>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/slot_table.hpp"

namespace metrale::core {

std::atomic<registry_detail::ContextTable*> registry_detail::g_table{nullptr};
const std::atomic<uint64_t> registry_detail::kNoSerial{0};

metrale_context* registry_detail::find_context_slow(uint64_t handle) noexcept {
  const ContextTable* t = g_table.load(std::memory_order_acquire);
  if (t == nullptr) return nullptr;
  const std::atomic<uint64_t>* serial = nullptr;
  const ContextEntry* e = t->find_cached(handle, &serial);
  if (e == nullptr) return nullptr;
  t_last = LastLookup{handle, serial, e->ctx};
  return e->ctx;
}

namespace {

using registry_detail::ContextEntry;
using registry_detail::ContextTable;

// Never destroyed: a context handle may still be looked up from an atexit
// handler or a thread that outlives main.
SlotTable<ContextEntry>& contexts() {
  static auto* table = [] {
    auto* t = new ContextTable("context");
    registry_detail::g_table.store(t, std::memory_order_release);  // find_context's view
    return t;
  }();
  return *table;
}

// The walk of for_each_context. A context being read by a walk is pinned;
// take_context unregisters it (under walk_mutex) and then waits only for
// the walks that pinned it to finish with it, never for a whole walk: a
// destroy of one context cannot wait behind another context's locks.
struct Walks {
  std::mutex mutex;
  std::condition_variable unpinned;
  std::unordered_set<metrale_context*> live;     // registered contexts
  std::unordered_map<metrale_context*, int> pins;  // walks reading one now
};
Walks& walks() {
  static auto* w = new Walks;  // never destroyed, as the table
  return *w;
}
std::mutex& walk_mutex() { return walks().mutex; }

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
  walks().live.clear();  // every context of the parent is dead here
  walks().pins.clear();  // and no walk of the parent runs here
  walk_mutex().unlock();
}

void install_fork_handlers() {
  static std::once_flag once;
  std::call_once(once, [] { pthread_atfork(fork_prepare, fork_parent, fork_child); });
}

}  // namespace

uint64_t register_context(metrale_context* ctx) {
  install_fork_handlers();
  std::lock_guard<std::mutex> lock(walk_mutex());
  walks().live.insert(ctx);  // first: it may throw bad_alloc, with nothing registered
  try {
    return contexts().insert([&](ContextEntry& e) { e.ctx = ctx; });
  } catch (...) {
    walks().live.erase(ctx);  // the table is full (OUT_OF_MEMORY)
    throw;
  }
}

metrale_context* take_context(uint64_t handle) noexcept {
  std::unique_lock<std::mutex> lock(walk_mutex());
  metrale_context* out = nullptr;
  contexts().erase(handle, [&](ContextEntry& e) { out = e.ctx; });
  if (out == nullptr) return nullptr;
  Walks& w = walks();
  w.live.erase(out);
  w.unpinned.wait(lock, [&] { return w.pins.find(out) == w.pins.end(); });
  return out;
}

namespace {

// A pin held while fn reads a context: take_context waits for its release.
struct Pin {
  Walks& w;
  metrale_context* c;
  ~Pin() {
    std::lock_guard<std::mutex> lock(w.mutex);
    if (--w.pins[c] == 0) w.pins.erase(c);
    w.unpinned.notify_all();
  }
};

}  // namespace

void for_each_context(const std::function<void(metrale_context&)>& fn) {
  Walks& w = walks();
  std::vector<metrale_context*> seen;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    for (ContextEntry* e : contexts().live()) {
      if (e->ctx != nullptr) seen.push_back(e->ctx);  // slot order
    }
  }
  for (metrale_context* c : seen) {
    {
      std::lock_guard<std::mutex> lock(w.mutex);
      if (w.live.count(c) == 0) continue;  // destroyed since
      ++w.pins[c];
    }
    Pin pin{w, c};
    fn(*c);
  }
}

bool with_context(uint64_t handle, const std::function<void(metrale_context&)>& fn) {
  Walks& w = walks();
  metrale_context* c = nullptr;
  {
    std::lock_guard<std::mutex> lock(w.mutex);
    // Under the lock take_context unregisters: found here, c is not yet
    // taken, and the pin keeps it from being deleted until fn returns.
    c = find_context(handle);
    if (c == nullptr || w.live.count(c) == 0) return false;
    ++w.pins[c];
  }
  Pin pin{w, c};
  fn(*c);
  return true;
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
