// The staged copy pipelines. A copy is cut into pieces of at most one
// buffer each (piece_bytes); piece i uses buffer i % count.
// h2d: the workers copy piece i from the caller's memory into its buffer
//   while the DMA of the pieces before it runs (the caller enqueues piece
//   i - 1's DMA while they start on piece i); before refilling a buffer
//   the pipeline waits for that buffer's previous DMA (its event). Returns
//   once every byte of src is in a buffer and every DMA is enqueued: the
//   caller may reuse src, the last DMAs may still run (their events mark
//   the buffers in flight for the next user of the ring).
// d2h: the mirror: the DMAs of the first `count` pieces are enqueued at
//   once; piece i is copied out of its buffer once its event completes, and
//   the buffer is then refilled with piece i + count. Returns with every
//   byte in dst.
// Both throw the backend's error (the driver's message) when a DMA or a
// wait fails; the pieces before it were then already moved. `stores` is how
// the host side writes (stream_copy.hpp).
#pragma once

#include <cstddef>

#include "core/staging/copy_workers.hpp"
#include "core/staging/staging_ring.hpp"

namespace metrale::core::staging {

// Pieces are never cut smaller than this (or than a buffer, if smaller):
// each piece costs an event and a wake of the copy threads.
constexpr size_t kMinPiece = size_t{512} << 10;

// The piece size of a copy of `bytes` over `count` buffers of
// `buffer_bytes`: a buffer, or for a copy of fewer than `count` buffers
// about bytes / count (whole pages, at least kMinPiece). In pieces of a
// whole buffer, a copy of one or two buffers would not overlap its memcpy
// with its DMA at all (h2d 8 MiB, 4 MiB buffers: 1.26x the direct copy on
// the H200); cut in `count` pieces, piece i's memcpy runs beside piece
// i - 1's DMA.
size_t piece_bytes(size_t bytes, size_t buffer_bytes, size_t count);

void staged_h2d(StagingRing::Lease& ring, CopyWorkers& workers, StagingDevice& dev, DevPtr dst,
                const void* src, size_t bytes, StreamHandle s, StoreMode stores);
void staged_d2h(StagingRing::Lease& ring, CopyWorkers& workers, StagingDevice& dev, void* dst,
                DevPtr src, size_t bytes, StreamHandle s, StoreMode stores);

}  // namespace metrale::core::staging
