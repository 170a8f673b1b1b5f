// Where the pool's memory and events come from: a narrow interface, so the
// pool runs on the real backend (BackendChunkSource) and, in tests and
// benchmarks, on plain host memory with fake events whose completion the
// test controls.
//
// Streams and events are opaque 64-bit handles, as in backend::Backend.
// Every method may be called with the pool's lock held; none calls back
// into the pool.
#pragma once

#include <cstddef>
#include <cstdint>

namespace metrale::core::pool {

using DevPtr = uint64_t;
using StreamId = uint64_t;
using EventId = uint64_t;

class ChunkSource {
 public:
  virtual ~ChunkSource() = default;

  // A chunk of exactly `bytes` (a multiple of 512), aligned to at least 512,
  // or 0 when the memory is not there (out of memory). Other failures throw
  // metrale::Error.
  virtual DevPtr chunk_alloc(size_t bytes) = 0;
  // Gives a chunk back. The pool calls it only once no stream can still use
  // the chunk (every event covering its last frees has completed).
  virtual void chunk_free(DevPtr ptr, size_t bytes) = 0;

  virtual EventId event_create() = 0;
  virtual void event_destroy(EventId e) = 0;
  // Records e at the current end of stream s (re-recording is allowed).
  virtual void event_record(EventId e, StreamId s) = 0;
  // True when everything before the record has finished. Never blocks.
  virtual bool event_query(EventId e) = 0;
  // Blocks until e completes: used only by trim and the out-of-memory path.
  virtual void event_wait(EventId e) = 0;
  // True while s is capturing a graph (no event may be recorded on it).
  // Asked only off the hot path: cross-stream looks and record_stream frees.
  virtual bool stream_capturing(StreamId s) = 0;
};

}  // namespace metrale::core::pool
