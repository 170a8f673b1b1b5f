#include "core/pool/backend_chunk_source.hpp"

namespace metrale::core::pool {

DevPtr BackendChunkSource::chunk_alloc(size_t bytes) {
  try {
    size_t reserved = 0;
    const DevPtr ptr = backend_.mem_alloc(bytes, &reserved);
    if (annotate_) backend_.mem_annotate_chunk(ptr, bytes);
    return ptr;
  } catch (const Error& e) {
    if (e.status() == METRALE_ERROR_OUT_OF_MEMORY) return 0;
    throw;
  }
}

void BackendChunkSource::chunk_free(DevPtr ptr, size_t) {
  // Before the free: once freed, the driver may hand the range to anyone.
  if (annotate_) backend_.mem_annotate_chunk_release(ptr);
  backend_.mem_free(ptr);
}

EventId BackendChunkSource::event_create() { return backend_.event_create(false); }

void BackendChunkSource::event_destroy(EventId e) { backend_.event_destroy(e); }

void BackendChunkSource::event_record(EventId e, StreamId s) { backend_.event_record(e, s); }

bool BackendChunkSource::event_query(EventId e) { return backend_.event_query(e); }

void BackendChunkSource::event_wait(EventId e) { backend_.event_synchronize(e); }

bool BackendChunkSource::stream_capturing(StreamId s) { return backend_.stream_is_capturing(s); }

}  // namespace metrale::core::pool
