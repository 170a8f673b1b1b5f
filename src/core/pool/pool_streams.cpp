// Retiring a stream: its handle dies (and a backend may give the same value
// to a new stream), so nothing in the pool may keep naming it. Everything
// it ran is waited for first, so what it freed or used is safe for anyone.
#include <algorithm>
#include <exception>
#include <string>

#include "backend/error.hpp"
#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

void CachingPool::remember_retired_held(StreamId s) {
  if (!retired_.insert(s).second) return;
  retired_order_.push_back(s);
  if (retired_order_.size() > kRetiredKept) {
    retired_.erase(retired_order_.front());
    retired_order_.pop_front();
  }
}

void CachingPool::refuse_retired(StreamId s) const {
  if (retired_.count(s) != 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "the stream was destroyed by another thread while this call was using it (backend "
         "stream " + std::to_string(s) + "); allocate on a live stream");
  }
}

void CachingPool::stream_born(StreamId s) {
  std::lock_guard<FastMutex> lock(mu_);
  if (retired_.erase(s) != 0) {
    retired_order_.erase(std::find(retired_order_.begin(), retired_order_.end(), s));
  }
}

bool CachingPool::names_stream_held(StreamId s) const {
  if (streams_.find(s) != streams_.end()) return true;
  for (const auto& c : chunks_) {
    for (const Block* b = c->first; b != nullptr; b = b->next) {
      if (b->stream == s || std::find(b->uses.begin(), b->uses.end(), s) != b->uses.end()) {
        return true;
      }
    }
  }
  return false;
}

void CachingPool::refuse_retirement_now(StreamId gone, const char* why) {
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       "pool: stream " + std::to_string(gone) + " cannot be retired now: " + why +
           "; its blocks stay ordered on it until a later retirement");
}

void CachingPool::retire_stream(StreamId gone, StreamId heir) {
  // Its work is waited for without the lock (pool_settle.cpp): a call
  // racing the destroy may run a host kernel there that allocates, i.e.
  // waits for this lock. Frees and uses on it made during a wait (such
  // calls again) take one more round; a stream still busy after kRounds is
  // put off like a cycle (below), never waited for with the lock held.
  // A failed wait (a lost device) still forgets the stream below: its handle
  // dies with it, and a block's uses or a stream state naming it would reach
  // the driver later with a dangling stream. The error is rethrown after.
  // A wait refused as a cycle (the stream's work waits for this thread, a
  // host kernel) is no lost device: that work still runs, so nothing is
  // retired and INVALID_ARGUMENT goes to the caller, who retries later.
  constexpr int kRounds = 8;
  static constexpr const char* kCycle = "its work waits for this thread (a host kernel)";
  std::exception_ptr failed;
  std::unique_lock<FastMutex> lock(mu_, std::defer_lock);
  for (int round = 0;; ++round) {
    uint64_t seen = 0;
    {
      std::lock_guard<FastMutex> look(mu_);
      auto it = streams_.find(gone);
      if (it != streams_.end()) seen = it->second->free_count();
    }
    bool waited = true;
    try {
      waited = settle(gone);
    } catch (...) {
      failed = std::current_exception();
    }
    if (!waited) refuse_retirement_now(gone, kCycle);
    lock.lock();
    auto it = streams_.find(gone);
    // Settled when no free or use was counted on it since the look before
    // the wait, whose event covered everything queued there by then.
    const bool settled = it == streams_.end() || it->second->free_count() == seen;
    if (settled || failed || round + 1 >= kRounds) break;
    lock.unlock();
  }
  if (!names_stream_held(gone)) {
    remember_retired_held(gone);
    if (failed) std::rethrow_exception(failed);
    return;
  }
  StreamState& g = state_for(gone);
  flush_bins(g);
  g.next_epoch();  // so that cover_frees records even with no free counted
  if (g.done() + 1 < g.free_count()) {
    // Not covered: still busy after kRounds (calls racing the destroy kept
    // freeing there), or it captures. Put off: never a wait with the lock
    // held. Only after a failed wait (a lost device) is it forgotten anyway.
    if (!failed) refuse_retirement_now(gone, "calls racing its destroy keep using it");
    try {
      g.wait_all(src_);
    } catch (...) {
      // The first failure is the one rethrown below.
    }
  }
  std::vector<Block*> cached;
  for (auto& c : chunks_) {
    for (Block* b = c->first; b != nullptr; b = b->next) {
      b->uses.erase(std::remove(b->uses.begin(), b->uses.end(), gone), b->uses.end());
      if (b->stream != gone) continue;
      if (b->state == BlockState::FREE) {
        cached.push_back(b);
      } else {
        b->stream = heir;  // handed out (freed later on heir) or pending
        b->epoch = 0;
      }
    }
  }
  StreamState& h = state_for(heir);
  for (Block* b : cached) {
    g.index(b->chunk->small).erase(b);
    b->epoch = 0;  // complete: waited for above
    insert_free(b, h);
  }
  g.release_events(src_);
  streams_.erase(gone);
  last_state_ = nullptr;
  last_stream_ = 0;
  remember_retired_held(gone);  // last: state_for above would refuse it
  if (failed != nullptr) std::rethrow_exception(failed);
}

}  // namespace metrale::core::pool
