// The pool's chunk source on a real backend: chunks are mem_alloc / mem_free,
// events are the backend's (without timing). A thin adapter, no state.
#pragma once

#include "backend/backend.hpp"
#include "core/pool/chunk_source.hpp"

namespace metrale::core::pool {

class BackendChunkSource final : public ChunkSource {
 public:
  explicit BackendChunkSource(backend::Backend& backend) : backend_(backend) {}

  // 0 on OUT_OF_MEMORY (the pool then releases its cache and retries); any
  // other error propagates.
  DevPtr chunk_alloc(size_t bytes) override;
  void chunk_free(DevPtr ptr, size_t bytes) override;
  EventId event_create() override;
  void event_destroy(EventId e) override;
  void event_record(EventId e, StreamId s) override;
  bool event_query(EventId e) override;
  void event_wait(EventId e) override;
  bool stream_capturing(StreamId s) override;

 private:
  backend::Backend& backend_;
};

}  // namespace metrale::core::pool
