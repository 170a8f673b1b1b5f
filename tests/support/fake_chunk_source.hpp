// A ChunkSource for the pool's tests and benchmark: chunks are addresses
// handed out from a counter (the pool never touches the memory, so 1M live
// blocks or 64 MiB chunks cost nothing), an optional capacity makes
// chunk_alloc answer 0 (out of memory), and events complete only when the
// test says so (or event_wait is called, which stands for blocking on them).
// Thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <map>
#include <set>
#include <mutex>
#include <vector>

#include "backend/error.hpp"
#include "core/fast_mutex.hpp"
#include "core/pool/chunk_source.hpp"

namespace pooltest {

using metrale::core::pool::DevPtr;
using metrale::core::pool::EventId;
using metrale::core::pool::StreamId;

class FakeChunkSource final : public metrale::core::pool::ChunkSource {
 public:
  struct Event {
    bool recorded = false;
    bool complete = true;
    uint64_t generation = 0;  // complete_all() count when it was recorded
    StreamId stream = 0;
  };

  DevPtr chunk_alloc(size_t bytes) override {
    std::lock_guard<std::mutex> l(mu);
    if (outstanding + bytes > capacity) {
      ++failed_allocs;
      return 0;
    }
    const DevPtr p = next;
    next += bytes + (size_t{1} << 21);  // a gap: chunks are never adjacent
    outstanding += bytes;
    ++allocs;
    live[p] = bytes;
    return p;
  }
  void chunk_free(DevPtr ptr, size_t bytes) override {
    std::lock_guard<std::mutex> l(mu);
    auto it = live.find(ptr);
    if (it == live.end() || it->second != bytes) ++bad_frees;
    if (it != live.end()) live.erase(it);
    outstanding -= bytes;
    ++frees;
    freed_sizes.push_back(bytes);
  }
  EventId event_create() override {
    std::lock_guard<std::mutex> l(mu);
    events[++last_event] = Event{};
    return last_event;
  }
  void event_destroy(EventId e) override {
    std::lock_guard<std::mutex> l(mu);
    events.erase(e);
  }
  void event_record(EventId e, StreamId s) override {
    std::lock_guard<std::mutex> l(mu);
    Event& ev = events.at(e);
    ev.recorded = true;
    ev.complete = auto_complete;
    ev.generation = generation;
    ev.stream = s;
    ++records;
  }
  bool event_query(EventId e) override {
    std::lock_guard<std::mutex> l(mu);
    Event& ev = events.at(e);
    // complete_all() since the record: done, without walking every event.
    if (ev.generation < generation) ev.complete = true;
    return ev.complete;
  }
  void event_wait(EventId e) override {
    // A single-threaded test's probe: the pool's lock is free unless this
    // very call holds it (a wait that would stop every other thread).
    if (pool_lock != nullptr) {
      if (pool_lock->try_lock()) {
        pool_lock->unlock();
      } else {
        ++waits_locked;
      }
    }
    // The test's code, once, before the first wait ends (the pool waits
    // without its lock: this is another thread's call meanwhile).
    if (std::function<void()> f = std::exchange(during_wait, nullptr)) f();
    std::lock_guard<std::mutex> l(mu);
    // A lost device, as the test says: the wait fails, nothing completes.
    if (fail_waits) throw metrale::Error(METRALE_ERROR_CONTEXT_LOST, "fake: the wait failed");
    events.at(e).complete = true;
    ++waits;
  }

  bool stream_capturing(StreamId s) override {
    std::lock_guard<std::mutex> l(mu);
    return capturing.count(s) != 0;
  }

  // The test's side: the work before every recorded event has finished.
  void complete_all() {
    std::lock_guard<std::mutex> l(mu);
    ++generation;  // O(1): the threads test calls this in a loop
  }
  // Completes the events recorded on stream s only.
  void complete_stream(StreamId s) {
    std::lock_guard<std::mutex> l(mu);
    for (auto& kv : events)
      if (kv.second.stream == s) kv.second.complete = true;
  }
  size_t incomplete() {
    std::lock_guard<std::mutex> l(mu);
    size_t n = 0;
    for (auto& kv : events)
      n += kv.second.recorded && !kv.second.complete && kv.second.generation >= generation;
    return n;
  }

  std::mutex mu;
  size_t capacity = ~size_t{0} / 2;
  bool auto_complete = false;
  bool fail_waits = false;  // event_wait throws CONTEXT_LOST
  std::function<void()> during_wait;  // see event_wait
  metrale::core::FastMutex* pool_lock = nullptr;  // see event_wait
  uint64_t waits_locked = 0;
  uint64_t generation = 0;
  DevPtr next = DevPtr{1} << 32;
  size_t outstanding = 0;
  uint64_t allocs = 0, frees = 0, failed_allocs = 0, bad_frees = 0;
  uint64_t records = 0, waits = 0;
  EventId last_event = 0;
  std::map<EventId, Event> events;
  std::map<DevPtr, size_t> live;
  std::set<StreamId> capturing;  // streams the test says capture
  std::vector<size_t> freed_sizes;
};

}  // namespace pooltest
