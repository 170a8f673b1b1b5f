#include "core/pool/caching_pool.hpp"

#include <algorithm>
#include <string>

#include "backend/error.hpp"
#include "core/pool/size_class.hpp"

namespace metrale::core::pool {

CachingPool::CachingPool(ChunkSource& source, FastMutex* shared_lock)
    : src_(source), mu_(shared_lock != nullptr ? *shared_lock : own_mu_) {}

CachingPool::~CachingPool() {
  try {
    settle_held();
  } catch (...) {
    // A lost device: give the memory back regardless.
  }
  for (auto& c : chunks_) {
    try {
      src_.chunk_free(c->base, c->size);
    } catch (...) {
    }
  }
  for (auto& kv : streams_) {
    try {
      kv.second->release_events(src_);
    } catch (...) {
    }
  }
  for (EventId e : spare_events_) {
    try {
      src_.event_destroy(e);
    } catch (...) {
    }
  }
}

StreamState& CachingPool::state_for_slow(StreamId s) {
  auto it = streams_.find(s);
  if (it == streams_.end()) {
    refuse_retired(s);
    it = streams_.emplace(s, std::make_unique<StreamState>(s, ++state_serial_)).first;
  }
  auto& slot = it->second;
  last_stream_ = s;
  last_state_ = slot.get();
  return *slot;
}

Block* CachingPool::new_block() {
  if (!spare_blocks_.empty()) {
    Block* b = spare_blocks_.back();
    spare_blocks_.pop_back();
    return b;
  }
  return &block_storage_.emplace_back();
}

void CachingPool::recycle(Block* b) {
  b->prev = b->next = nullptr;
  b->chunk = nullptr;
  b->uses.clear();
  b->pending_events.clear();
  b->epoch = 0;
  b->requested = 0;
  b->pattern = PatternRange{};
  b->owners.reset();
  spare_blocks_.push_back(b);
}

Block* CachingPool::take_from_other_streams(size_t size, bool small, StreamId stream,
                                            StreamState** owner) {
  Block* best = nullptr;
  for (auto& kv : streams_) {
    if (kv.first == stream) continue;
    StreamState& s = *kv.second;
    flush_bins(s);
    FreeIndex& idx = s.index(small);
    if (!idx.has_fit(size)) continue;
    Block* c = idx.best_fit(size, s.ready_epoch(src_));
    if (c == nullptr) {
      cover_if_not_capturing(s);  // so that a later look may find them ready
      continue;
    }
    if (best == nullptr || c->size < best->size) {
      best = c;
      *owner = &s;
    }
  }
  if (best != nullptr) (*owner)->index(small).erase(best);
  return best;
}

void CachingPool::flush_bins(StreamState& s) {
  s.bins().drain([&](Block* b) {
    if (b->unchecked()) {
      to_sink(b);
    } else {
      insert_free(b, s);
    }
  });
}

void CachingPool::to_sink(Block* b) {
  const PadOwners& o = *b->owners;
  hand_out(b, o.bytes + o.pad, b->stream);
  if (sink_ != nullptr && sink_->take_unchecked(b)) return;
  // Into the free index, not the bins: a drain may be walking them.
  b->owners->count = 0;
  b->pattern = PatternRange{};
  StreamState& owner = state_for(b->stream);
  release_counts(b);
  b->epoch = owner.next_epoch();
  insert_free(b, owner);
}

void CachingPool::flush_unchecked() {
  std::lock_guard<FastMutex> lock(mu_);
  for (auto& kv : streams_) flush_bins(*kv.second);
}

void CachingPool::cover_if_not_capturing(StreamState& s) {
  if (!src_.stream_capturing(s.id())) s.cover_frees(src_);
}

Block* CachingPool::fetch_chunk(size_t size, size_t bytes, bool small, StreamId stream,
                                bool release_cached_on_oom) {
  const size_t csize = chunk_size_for(size);
  // What the chunk needs in host memory, before the driver's allocation:
  // past it nothing throws, so a failed call never holds (or loses) a chunk
  // (rule 1). The block stays on the spare list until the chunk is in.
  auto chunk = std::make_unique<Chunk>();
  if (spare_blocks_.empty()) {
    spare_blocks_.reserve(spare_blocks_.size() + 1);
    spare_blocks_.push_back(&block_storage_.emplace_back());
  }
  chunks_.reserve(chunks_.size() + 1);
  DevPtr base = src_.chunk_alloc(csize);
  size_t released = 0;
  if (base == 0 && !release_cached_on_oom) {
    fail(METRALE_ERROR_OUT_OF_MEMORY, "pool: no chunk of " + std::to_string(csize) +
                                          " bytes (a first try, nothing released)");
  }
  if (base == 0) {
    // Never a wait here, the lock held: the work waited for may be a host
    // kernel that allocates (allocate settles unlocked before this try).
    promote_pending(false);
    released = release_cached(0);
    base = src_.chunk_alloc(csize);
  }
  if (base == 0) {
    fail(METRALE_ERROR_OUT_OF_MEMORY,
         "pool: no chunk of " + std::to_string(csize) + " bytes for a request of " +
             std::to_string(bytes) + " bytes on stream " + std::to_string(stream) +
             " (released " + std::to_string(released) +
             " cached bytes and retried once); the pool holds " +
             std::to_string(st_.reserved - st_.in_use) + " bytes cached and " +
             std::to_string(st_.in_use) + " bytes in use");
  }
  chunk->base = base;
  chunk->size = csize;
  chunk->small = small;
  chunk->serial = ++chunk_serial_;
  Block* b = new_block();
  b->ptr = base;
  b->size = csize;
  b->chunk = chunk.get();
  b->stream = stream;
  b->epoch = 0;
  b->state = BlockState::FREE;
  b->pattern = PatternRange{};  // fresh memory: never filled
  chunk->first = b;
  chunks_.push_back(std::move(chunk));
  st_.reserved += csize;
  ++st_.chunk_allocs;
  return b;
}

Block* CachingPool::split(Block* b, size_t size, StreamState& owner) {
  if (!should_split(b->size, size)) return b;
  // Short of host memory for the rest's block or its index node, b goes
  // out whole: the caller already took it, and a throw here would lose it
  // (rule 1). The rest's block leaves the spare list once indexed.
  if (spare_blocks_.empty()) {
    try {
      spare_blocks_.reserve(1);
      spare_blocks_.push_back(&block_storage_.emplace_back());
    } catch (const std::bad_alloc&) {
      return b;  // (a deque node made before the failure is kept for later)
    }
  }
  Block* r = spare_blocks_.back();
  r->ptr = b->ptr + size;
  r->size = b->size - size;
  r->chunk = b->chunk;
  r->stream = owner.id();
  r->epoch = b->epoch;
  r->state = BlockState::FREE;
  r->pattern = rest_pattern_after_split(b->pattern, size);
  try {
    owner.index(b->chunk->small).insert(r);  // r's order: its ptr and size
  } catch (const std::bad_alloc&) {
    r->chunk = nullptr;
    r->pattern = PatternRange{};
    return b;
  }
  spare_blocks_.pop_back();
  b->pattern = head_pattern_after_split(b->pattern, size);
  r->prev = b;
  r->next = b->next;
  if (b->next != nullptr) b->next->prev = r;
  b->next = r;
  b->size = size;
  return b;
}

Block* CachingPool::allocate(size_t bytes, StreamId stream, bool capturing) {
  try {
    std::lock_guard<FastMutex> lock(mu_);
    return allocate_held(bytes, stream, capturing, false);
  } catch (const Error& e) {
    if (e.status() != METRALE_ERROR_OUT_OF_MEMORY || bytes > kMaxRequest) throw;
  }
  // Out of memory: the frees waited for without the lock (pool_settle.cpp),
  // then the retry that releases the cache. Frees made by other threads
  // during the wait get one more round, waited for unlocked too.
  for (int round = 0;; ++round) {
    settle(0);
    std::lock_guard<FastMutex> lock(mu_);
    try {
      return allocate_held(bytes, stream, capturing);
    } catch (const Error& e) {
      if (e.status() != METRALE_ERROR_OUT_OF_MEMORY || round > 0 || !unsettled_held()) throw;
    }
  }
}

bool CachingPool::unsettled_held() {
  if (!pending_.empty()) return true;
  for (auto& kv : streams_) {
    StreamState& s = *kv.second;
    if (s.ready_epoch(src_) != s.free_count() && !src_.stream_capturing(s.id())) return true;
  }
  return false;
}

Block* CachingPool::allocate_held(size_t bytes, StreamId stream, bool capturing,
                                  bool release_cached_on_oom, ReuseKey key) {
  if (bytes > kMaxRequest) {
    fail(METRALE_ERROR_OUT_OF_MEMORY,
         "pool: a request of " + std::to_string(bytes) + " bytes can never be served");
  }
  const size_t size = round_size(bytes);
  const bool small = is_small(size);
  // The fast path: a block of exactly this size this stream freed lately
  // (no event query on it: pending blocks are looked at only on a miss).
  if (!capturing) {
    if (Block* hit = take_binned_held(bytes, stream, key)) return hit;
  }
  StreamState& mine = state_for(stream);
  StreamState* owner = &mine;
  if (!capturing) {
    // A large miss looks at the coalesced picture first: binned blocks do
    // not merge, so without this the best fit below split a big free block
    // while neighbours in the bins would have merged into an exact fit, and
    // with shapes changing every step the pool grew chunk after chunk (a
    // transformer trace: 4.5 -> 6.2 GB reserved over its replays, torch's
    // allocator 4.18 GiB; this gives 4.18 too). Small sizes keep their bins:
    // their chunks are 2 MiB, and the fast loop is mostly small.
    if (!is_small(size)) flush_bins(mine);
  } else {
    flush_bins(mine);
  }
  if (!pending_.empty()) promote_pending(false);
  // Capturing: the graph's replays may run after work that is later on the
  // stream's eager timeline than these frees, so only completed ones count.
  const uint64_t own_ready = capturing ? mine.ready_epoch(src_) : UINT64_MAX;
  Block* b = mine.index(small).best_fit(size, own_ready);
  if (b == nullptr && !mine.bins().empty()) {
    flush_bins(mine);  // coalesced, other sizes may serve this one
    b = mine.index(small).best_fit(size, own_ready);
  }
  if (b == nullptr && merge_completed(stream) > 0) {
    b = mine.index(small).best_fit(size, own_ready);
  }
  if (b != nullptr) {
    mine.index(small).erase(b);
  } else {
    b = take_from_other_streams(size, small, stream, &owner);
    if (b == nullptr) {
      b = fetch_chunk(size, bytes, small, stream, release_cached_on_oom);
      owner = &mine;
    }
  }
  // Nothing below throws: split hands b out whole when short of memory.
  split(b, size, *owner);
  return hand_out(b, bytes, stream);
}

void CachingPool::insert_free(Block* b, StreamState& owner) {
  FreeIndex& idx = owner.index(b->chunk->small);
  b->state = BlockState::FREE;
  b->stream = owner.id();
  auto mergeable = [&](const Block* n) {
    return n != nullptr && n->state == BlockState::FREE && n->stream == owner.id();
  };
  if (mergeable(b->prev)) {
    Block* p = b->prev;
    idx.erase(p);
    p->pattern = pattern_after_merge(p->size, p->pattern, b->pattern);
    p->size += b->size;
    p->epoch = std::max(p->epoch, b->epoch);
    p->next = b->next;
    if (b->next != nullptr) b->next->prev = p;
    recycle(b);
    b = p;
  }
  if (mergeable(b->next)) {
    Block* n = b->next;
    idx.erase(n);
    b->pattern = pattern_after_merge(b->size, b->pattern, n->pattern);
    b->size += n->size;
    b->epoch = std::max(b->epoch, n->epoch);
    b->next = n->next;
    if (n->next != nullptr) n->next->prev = b;
    recycle(n);
  }
  idx.insert(b);
}

void CachingPool::free(Block* b, PatternRange pattern) {
  std::lock_guard<FastMutex> lock(mu_);
  free_locked(b, b->stream, pattern);
}

void CachingPool::free_on(Block* b, StreamId stream, PatternRange pattern) {
  std::lock_guard<FastMutex> lock(mu_);
  free_locked(b, stream, pattern);
}

void CachingPool::free_locked(Block* b, StreamId stream, PatternRange pattern) {
  // Freed on another stream than its own: it stays with its own stream's
  // cache (where it coalesces with its neighbours), behind an event on the
  // freeing stream, as torch does. Moving it to the freeing stream's cache
  // instead let a stream that only frees (a communication stream) collect
  // blocks nobody could merge: reserved memory grew with every step.
  // Every step that may throw comes before the block changes, so a failed
  // free leaves it handed out exactly as it was (rule 1).
  StreamId added = 0;  // the freeing stream, a new use of the block
  if (stream != b->stream) {
    // A retired freeing stream (a call racing its destroy) ran all its work
    // before the retirement ended: complete, never kept, and never asked
    // about (its backend handle may be gone), as in record_stream_held.
    const bool retired = retired_.count(stream) != 0;
    refuse_capturing_use(b, retired ? 0 : stream);  // before the block changes: CAPTURE acts on nothing
    if (!retired && std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end()) {
      state_for(stream);  // may throw (a new state): the block is unchanged then
      added = stream;
    }
    stream = b->stream;
  }
  if (b->uses.empty() && added == 0) {
    // The common case: used on its own stream only, no event to record.
    // free_own_held's work, on `stream` as computed above (the same stream
    // here; written out so that a mistake above shows as a block cached on
    // the wrong stream rather than as a missing event).
    // Whatever the owner wrote: only a checked range (the caller's word) stays.
    b->pattern = pattern;  // on its own stream
    if (b->owners != nullptr) b->owners->count = 0;
    StreamState& owner = state_for(stream);
    release_counts(b);
    b->epoch = owner.next_epoch();
    if (!owner.bins().put(b, bin_cap(b))) insert_free(b, owner);
    return;
  }
  refuse_capturing_use(b, 0);
  // An event on each stream that used the block but its own: room for them
  // (and for their way back to the spares) first, then the events, then
  // the block's place in pending_; a failing record or allocation gives the
  // events back and leaves the block as it was.
  size_t want = added != 0 ? 1 : 0;
  for (StreamId u : b->uses) want += u != stream ? 1 : 0;
  std::vector<EventId> events;
  events.reserve(want);
  spare_events_.reserve(spare_events_.size() + want);
  StreamState& owner = state_for(stream);
  try {
    auto record_on = [&](StreamId u) {
      EventId e;
      if (!spare_events_.empty()) {
        e = spare_events_.back();
        spare_events_.pop_back();
      } else {
        e = src_.event_create();
      }
      events.push_back(e);  // reserved: never throws
      src_.event_record(e, u);
    };
    for (StreamId u : b->uses) {
      if (u != stream) record_on(u);
    }
    if (added != 0) record_on(added);
    if (!events.empty()) pending_.push_back(b);
  } catch (...) {
    spare_events_.insert(spare_events_.end(), events.begin(), events.end());  // reserved
    throw;
  }
  if (added != 0) note_use_held(added);  // its state exists: never throws
  b->pattern = pattern;
  if (b->owners != nullptr) b->owners->count = 0;
  release_counts(b);
  b->uses.clear();
  b->epoch = owner.next_epoch();
  b->stream = stream;
  if (events.empty()) {
    if (!owner.bins().put(b, bin_cap(b))) insert_free(b, owner);
  } else {
    b->state = BlockState::PENDING;
    b->pending_events = std::move(events);
    ++st_.blocks_pending;
  }
}

void CachingPool::promote_pending(bool wait) {
  // Pending blocks are in free order: once one is not done, later ones
  // rarely are, so the look stops there (at most one event query per
  // allocation while any is pending, as torch's allocator does).
  while (!pending_.empty()) {
    Block* b = pending_.front();
    for (EventId e : b->pending_events) {
      if (wait) {
        src_.event_wait(e);
      } else if (!src_.event_query(e)) {
        return;
      }
    }
    spare_events_.insert(spare_events_.end(), b->pending_events.begin(),
                         b->pending_events.end());
    b->pending_events.clear();
    pending_.pop_front();
    --st_.blocks_pending;
    insert_free(b, state_for(b->stream));
  }
}

}  // namespace metrale::core::pool
