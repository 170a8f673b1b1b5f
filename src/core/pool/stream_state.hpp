// What the pool keeps per stream: the stream's free blocks (small and large
// indexes) and the events that tell other streams which of them are safe.
//
// Stream ordering without an event per free: each free onto stream S bumps
// S's free count and stamps the block with it (its epoch). An event recorded
// on S covers every free counted before the record, since S runs in order.
// S itself reuses its blocks at once; another stream T takes one only when
// an event covering its epoch has completed. The event is recorded lazily,
// the first time another stream looks for memory and finds S's blocks not
// yet covered (recorded later than the free, so conservative but correct),
// and never on the hot path where a stream reuses its own frees. Events of
// one stream complete in record order, so completion is a queue scanned
// from its front with non-blocking queries.
//
// This is the unit a later per-stream lock would guard; today the pool's
// single mutex covers it.
#pragma once

#include <cstdint>
#include <deque>
#include <vector>

#include "core/pool/chunk_source.hpp"
#include "core/pool/free_index.hpp"
#include "core/pool/reuse_bins.hpp"

namespace metrale::core::pool {

class StreamState {
 public:
  // serial: unique in its pool, so that a state made later for a reused
  // handle value is never taken for this one.
  StreamState(StreamId id, uint64_t serial) : id_(id), serial_(serial) {}
  StreamId id() const { return id_; }
  uint64_t serial() const { return serial_; }

  FreeIndex& index(bool small) { return small ? small_ : large_; }
  const FreeIndex& index(bool small) const { return small ? small_ : large_; }
  ReuseBins& bins() { return bins_; }
  const ReuseBins& bins() const { return bins_; }

  // Stamps a free onto this stream: the epoch the block carries.
  uint64_t next_epoch() { return ++free_count_; }
  // The newest epoch another stream may reuse, after polling the events in
  // flight (non-blocking).
  uint64_t ready_epoch(ChunkSource& src);
  // Makes sure an event covering every free so far is in flight (records
  // one when frees happened since the last record).
  void cover_frees(ChunkSource& src);
  // Blocks until every free so far is covered by a completed event.
  void wait_all(ChunkSource& src);
  // The free count now, and the newest epoch known complete (no polling).
  uint64_t free_count() const { return free_count_; }
  uint64_t done() const { return done_; }
  // An event of the caller's, recorded when the free count was `epoch`,
  // has completed: the frees it covers are safe for anyone, and the
  // events in flight it covers go back to the spares.
  void mark_done(uint64_t epoch);
  // Destroys the events this stream holds.
  void release_events(ChunkSource& src);

 private:
  struct InFlight {
    EventId event;
    uint64_t epoch;  // the free count when it was recorded
  };
  EventId take_event(ChunkSource& src);

  StreamId id_;
  uint64_t serial_;
  FreeIndex small_, large_;
  ReuseBins bins_;
  uint64_t free_count_ = 0;
  uint64_t recorded_ = 0;  // epoch covered by the newest recorded event
  uint64_t done_ = 0;      // epoch covered by the newest completed event
  std::deque<InFlight> in_flight_;
  std::vector<EventId> spare_events_;
};

}  // namespace metrale::core::pool
