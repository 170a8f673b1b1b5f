// Retiring a stream: its handle dies (and a backend may give the same value
// to a new stream), so nothing in the pool may keep naming it. Everything
// it ran is waited for first, so what it freed or used is safe for anyone.
#include <algorithm>
#include <exception>

#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

void CachingPool::retire_stream(StreamId gone, StreamId heir) {
  std::lock_guard<FastMutex> lock(mu_);
  auto it = streams_.find(gone);
  // One event at the end of `gone` covers its frees and every use of a
  // block on it (record_stream): after the wait nothing there is running.
  bool used = it != streams_.end();
  for (auto& c : chunks_) {
    for (Block* b = c->first; b != nullptr && !used; b = b->next) {
      used = b->stream == gone ||
             std::find(b->uses.begin(), b->uses.end(), gone) != b->uses.end();
    }
  }
  if (!used) return;
  StreamState& g = state_for(gone);
  flush_bins(g);
  g.next_epoch();  // so that cover_frees records even with no free counted
  // A failed wait (a lost device) still forgets the stream below: its handle
  // dies with it, and a block's uses or a stream state naming it would reach
  // the driver later with a dangling stream. The error is rethrown after.
  std::exception_ptr failed;
  try {
    g.wait_all(src_);
  } catch (...) {
    failed = std::current_exception();
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
  if (failed != nullptr) std::rethrow_exception(failed);
}

}  // namespace metrale::core::pool
