// The pool's chunk source on a real backend: chunks are mem_alloc / mem_free,
// events are the backend's (without timing). A thin adapter; its one piece
// of state is whether it annotates memory for tools (NVTX, see
// Backend::mem_annotate_*).
#pragma once

#include "backend/backend.hpp"
#include "core/pool/chunk_source.hpp"

namespace metrale::core::pool {

class BackendChunkSource final : public ChunkSource {
 public:
  // annotate: the context's METRALE_NVTX setting and
  // backend.mem_annotations_begin() both said yes. When false, no
  // annotation hook of the backend is ever called.
  explicit BackendChunkSource(backend::Backend& backend, bool annotate = false)
      : backend_(backend), annotate_(annotate) {}

  // 0 on OUT_OF_MEMORY (the pool then releases its cache and retries); any
  // other error propagates. An annotated chunk is registered as a heap
  // right after mem_alloc and released right before mem_free.
  DevPtr chunk_alloc(size_t bytes) override;
  void chunk_free(DevPtr ptr, size_t bytes) override;
  EventId event_create() override;
  void event_destroy(EventId e) override;
  void event_record(EventId e, StreamId s) override;
  bool event_query(EventId e) override;
  void event_wait(EventId e) override;
  bool stream_capturing(StreamId s) override;

  // Blocks, for tools: the caller that hands a block out calls
  // block_handed_out with the range the user may touch, and block_returned
  // with the same ptr before the block goes back to the pool. Inline and
  // non-virtual: without annotations each is one predictable branch.
  // Thread-safe, never throw.
  bool annotating() const { return annotate_; }
  void block_handed_out(DevPtr ptr, size_t bytes) noexcept {
    if (annotate_) backend_.mem_annotate_block(ptr, bytes);
  }
  void block_returned(DevPtr ptr) noexcept {
    if (annotate_) backend_.mem_annotate_block_release(ptr);
  }

 private:
  backend::Backend& backend_;
  const bool annotate_;
};

}  // namespace metrale::core::pool
