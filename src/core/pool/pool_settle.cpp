// Waiting for the frees a release needs complete (trim, the out-of-memory
// retry, a stream's retirement, the destroy).
//
// settle() waits with the pool's lock released: the work it waits for may
// be a host kernel (host backend) that allocates, i.e. waits for that lock,
// and every other thread's allocations would otherwise stop for as long as
// the device is busy. Under the lock it records an event of its own on each
// stream with frees not yet known complete and takes the events pending
// frees wait for; then it waits for them unlocked and, locked again, marks
// what they covered as complete. The pool's spare events it uses are never
// destroyed before the pool is, so a concurrent call may at worst re-record
// one (a longer wait, never a dangling one).
//
// A stream that captures gets no event (it would join the graph): its frees
// since its last completed event stay cached (release_cached skips them).
// A wait the source refuses (INVALID_ARGUMENT: the host backend's answer
// when the work waited for waits for this thread, a host kernel calling
// in) is skipped the same way: what it covers stays not known complete.
#include "backend/error.hpp"
#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

namespace {

// Waits for e; false when the source refuses the wait (a cycle), which
// only means the frees it covers are not known complete.
bool wait_unless_refused(ChunkSource& src, EventId e) {
  try {
    src.event_wait(e);
    return true;
  } catch (const Error& err) {
    if (err.status() != METRALE_ERROR_INVALID_ARGUMENT) throw;
    return false;
  }
}

}  // namespace

bool CachingPool::settle(StreamId only) {
  struct Cover {
    StreamId stream;
    uint64_t serial;  // of its state (0: none); a retired stream's value may
                      // be a new stream's by the time the wait ends
    uint64_t epoch;
    EventId event;
    bool waited;
  };
  std::vector<Cover> covers;
  std::vector<EventId> waits;
  {
    std::lock_guard<FastMutex> lock(mu_);
    // Short of host memory at any step, the events made so far go back to
    // the spares (or are destroyed): a failed call keeps none (rule 1).
    try {
      covers.reserve(only != 0 ? 1 : streams_.size());  // push_back below never throws
      auto cover = [&](StreamId id, uint64_t serial, uint64_t epoch) {
        if (src_.stream_capturing(id)) return;
        EventId e = 0;
        if (!spare_events_.empty()) {
          e = spare_events_.back();
          spare_events_.pop_back();
        } else {
          e = src_.event_create();
        }
        try {
          src_.event_record(e, id);
        } catch (...) {
          spare_event_held(e);
          throw;
        }
        covers.push_back({id, serial, epoch, e, false});
      };
      if (only != 0) {
        // A stream about to retire: all its work, uses of others' blocks too.
        if (names_stream_held(only)) {
          auto it = streams_.find(only);
          if (it != streams_.end()) {
            cover(only, it->second->serial(), it->second->free_count());
          } else {
            cover(only, 0, 0);
          }
        }
      } else {
        for (auto& kv : streams_) {
          StreamState& s = *kv.second;
          if (s.ready_epoch(src_) != s.free_count()) cover(s.id(), s.serial(), s.free_count());
        }
        for (const Block* b : pending_) waits.insert(waits.end(), b->pending_events.begin(),
                                                     b->pending_events.end());
      }
    } catch (...) {
      for (const Cover& c : covers) spare_event_held(c.event);
      throw;
    }
  }
  // Every event goes back to the spares, waited for or not (a failed wait:
  // a lost device).
  auto give_back = [&] {
    std::lock_guard<FastMutex> lock(mu_);
    for (const Cover& c : covers) spare_event_held(c.event);
  };
  bool all = true;
  try {
    for (Cover& c : covers) all &= c.waited = wait_unless_refused(src_, c.event);
    for (EventId e : waits) all &= wait_unless_refused(src_, e);
  } catch (...) {
    give_back();
    throw;
  }
  std::lock_guard<FastMutex> lock(mu_);
  for (const Cover& c : covers) {
    auto it = streams_.find(c.stream);
    // Unless retired meanwhile (and maybe made again for a new stream).
    if (c.waited && it != streams_.end() && it->second->serial() == c.serial) {
      it->second->mark_done(c.epoch);
    }
    spare_event_held(c.event);
  }
  promote_pending(false);
  return all;
}

void CachingPool::spare_event_held(EventId e) noexcept {
  try {
    spare_events_.push_back(e);
  } catch (...) {
    try {
      src_.event_destroy(e);
    } catch (...) {
      // A lost device: nothing left to give back.
    }
  }
}

void CachingPool::settle_held() {
  promote_pending(true);
  for (auto& kv : streams_) {
    if (!src_.stream_capturing(kv.second->id())) kv.second->wait_all(src_);
  }
}

}  // namespace metrale::core::pool
