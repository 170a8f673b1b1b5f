// Blocks used on streams other than their own: record_stream marks them,
// a free on another stream counts as such a use, and a use on a stream that
// captures refuses the free that would record an event into the graph. A
// use also counts as work on the stream it names, so that the stream's
// retirement (pool_streams.cpp) and settles cover it.
#include <algorithm>

#include "backend/error.hpp"
#include "core/pool/caching_pool.hpp"

namespace metrale::core::pool {

StreamId CachingPool::capturing_use(const Block* b, StreamId also) const {
  if (also != 0 && also != b->stream && src_.stream_capturing(also)) return also;
  for (StreamId u : b->uses) {
    if (u != b->stream && src_.stream_capturing(u)) return u;
  }
  return 0;
}

void CachingPool::refuse_capturing_use(const Block* b, StreamId also) const {
  if (capturing_use(b, also) != 0) {
    fail(METRALE_ERROR_CAPTURE,
         "the block was marked as used on a stream that is capturing a graph "
         "(metrale_record_stream): its free would record an event into that graph; free it "
         "after the capture ends");
  }
}

StreamId CachingPool::capturing_use_of(const Block* b) const {
  std::lock_guard<FastMutex> lock(mu_);
  return capturing_use(b, 0);
}

std::vector<StreamId> CachingPool::uses_of(const Block* b) const {
  std::lock_guard<FastMutex> lock(mu_);
  return b->uses;
}

void CachingPool::record_stream(Block* b, StreamId stream) {
  std::lock_guard<FastMutex> lock(mu_);
  record_stream_held(b, stream);
}

void CachingPool::record_stream_held(Block* b, StreamId stream) {
  // A stream retired meanwhile (a call racing its destroy) ran all its work
  // before the retirement ended: nothing to wait for, and its dead handle
  // is never kept.
  if (stream != b->stream && retired_.count(stream) == 0 &&
      std::find(b->uses.begin(), b->uses.end(), stream) == b->uses.end()) {
    note_use_held(stream);  // may throw (a new state): nothing recorded then
    b->uses.push_back(stream);
  }
}

void CachingPool::note_use_held(StreamId stream) {
  // A use counts as a free on that stream: its retirement then sees work it
  // has not waited for (retire_stream), and a settle covers it.
  state_for(stream).next_epoch();
}

}  // namespace metrale::core::pool
