#include "core/pool/stream_state.hpp"

namespace metrale::core::pool {

EventId StreamState::take_event(ChunkSource& src) {
  if (!spare_events_.empty()) {
    const EventId e = spare_events_.back();
    spare_events_.pop_back();
    return e;
  }
  return src.event_create();
}

uint64_t StreamState::ready_epoch(ChunkSource& src) {
  while (!in_flight_.empty() && src.event_query(in_flight_.front().event)) {
    done_ = in_flight_.front().epoch;
    spare_events_.push_back(in_flight_.front().event);
    in_flight_.pop_front();
  }
  return done_;
}

void StreamState::cover_frees(ChunkSource& src) {
  if (free_count_ == recorded_) return;
  const EventId e = take_event(src);
  try {
    src.event_record(e, id_);
  } catch (...) {
    spare_events_.push_back(e);
    throw;
  }
  in_flight_.push_back({e, free_count_});
  recorded_ = free_count_;
}

void StreamState::wait_all(ChunkSource& src) {
  cover_frees(src);
  while (!in_flight_.empty()) {
    src.event_wait(in_flight_.front().event);
    done_ = in_flight_.front().epoch;
    spare_events_.push_back(in_flight_.front().event);
    in_flight_.pop_front();
  }
}

void StreamState::mark_done(uint64_t epoch) {
  if (epoch > done_) done_ = epoch;
  if (epoch > recorded_) recorded_ = epoch;
  while (!in_flight_.empty() && in_flight_.front().epoch <= done_) {
    spare_events_.push_back(in_flight_.front().event);
    in_flight_.pop_front();
  }
}

void StreamState::release_events(ChunkSource& src) {
  // Every event is given back even when one destroy fails (a lost device):
  // the state is forgotten right after.
  auto destroy = [&](EventId e) {
    try {
      src.event_destroy(e);
    } catch (...) {
    }
  };
  for (const InFlight& f : in_flight_) destroy(f.event);
  in_flight_.clear();
  for (EventId e : spare_events_) destroy(e);
  spare_events_.clear();
}

}  // namespace metrale::core::pool
