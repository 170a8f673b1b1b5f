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
  for (size_t off = 0, i = 0; off < bytes; off += piece, ++i) {
    const size_t n = bytes - off < piece ? bytes - off : piece;
    const size_t k = i % ring.count();
    StagingBuffer& b = ring.buffer(k);
    ring.wait(dev, k);  // its previous DMA (this copy's or an earlier one's)
    workers.copy(b.host, from + off, n, stores);
    dev.h2d(dst + off, b.host, n, s);
    dev.event_record(b.done, s);
    b.in_flight = true;
  }
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
