// The h2d and d2h pipelines over a leased ring (see staged_copy.hpp).
#include "core/staging/staged_copy.hpp"

namespace metrale::core::staging {

size_t piece_bytes(size_t bytes, size_t buffer_bytes, size_t count) {
  constexpr size_t kPage = 4096;
  const size_t floor = kMinPiece < buffer_bytes ? kMinPiece : buffer_bytes;
  size_t piece = bytes / count + (bytes % count != 0);  // count pieces at most
  piece = (piece + kPage - 1) & ~(kPage - 1);
  if (piece < floor) piece = floor;
  if (piece > buffer_bytes) piece = buffer_bytes;
  return piece;
}

void staged_h2d(StagingRing::Lease& ring, CopyWorkers& workers, StagingDevice& dev, DevPtr dst,
                const void* src, size_t bytes, StreamHandle s, StoreMode stores) {
  const auto* from = static_cast<const unsigned char*>(src);
  const size_t piece = piece_bytes(bytes, ring.buffer_bytes(), ring.count());
  CopyWorkers::Run run(workers);
  // The DMA of piece i - 1 is enqueued while the workers copy piece i, so
  // the threads do not stand idle during the driver calls of each piece.
  StagingBuffer* last = nullptr;
  size_t last_off = 0, last_n = 0;
  auto enqueue_last = [&] {
    dev.h2d(dst + last_off, last->host, last_n, s);
    dev.event_record(last->done, s);
    last->in_flight = true;
  };
  for (size_t off = 0, i = 0; off < bytes; off += piece, ++i) {
    const size_t n = bytes - off < piece ? bytes - off : piece;
    StagingBuffer& b = ring.buffer(i % ring.count());
    ring.wait(dev, i % ring.count());  // its previous DMA (this copy's or an earlier one's)
    run.start(b.host, from + off, n, stores);
    if (last != nullptr) enqueue_last();  // a throw finishes the copy first (~Run)
    run.finish();
    last = &b;
    last_off = off;
    last_n = n;
  }
  if (last != nullptr) enqueue_last();
}

void staged_d2h(StagingRing::Lease& ring, CopyWorkers& workers, StagingDevice& dev, void* dst,
                DevPtr src, size_t bytes, StreamHandle s, StoreMode stores) {
  auto* to = static_cast<unsigned char*>(dst);
  const size_t piece = piece_bytes(bytes, ring.buffer_bytes(), ring.count());
  const size_t pieces = (bytes + piece - 1) / piece;
  auto length = [&](size_t i) { return i + 1 < pieces ? piece : bytes - i * piece; };
  // Enqueues piece i into its buffer, once the buffer is free.
  auto fetch = [&](size_t i) {
    const size_t k = i % ring.count();
    StagingBuffer& b = ring.buffer(k);
    ring.wait(dev, k);
    dev.d2h(b.host, src + i * piece, length(i), s);
    dev.event_record(b.done, s);
    b.in_flight = true;
  };
  const size_t ahead = pieces < ring.count() ? pieces : ring.count();
  for (size_t i = 0; i < ahead; ++i) fetch(i);
  for (size_t i = 0; i < pieces; ++i) {
    const size_t k = i % ring.count();
    ring.wait(dev, k);
    workers.copy(to + i * piece, ring.buffer(k).host, length(i), stores);
    if (i + ring.count() < pieces) fetch(i + ring.count());
  }
}

}  // namespace metrale::core::staging
