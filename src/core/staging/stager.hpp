// Pinned staging of large pageable copies, one per context (issue 10 item 4):
// the options (threshold, ring, threads), the ring and the copy workers.
// Core asks wants(bytes) and, for a pageable host side outside a capture,
// h2d()/d2h(); a false answer means "copy directly", with nothing done.
#pragma once

#include <atomic>
#include <cstddef>

#include "backend/backend.hpp"
#include "core/staging/copy_workers.hpp"
#include "core/staging/staging_ring.hpp"
#include "metrale_gpu.h"

namespace metrale::core::staging {

class Stager {
 public:
  explicit Stager(const metrale_context_options_t& o);

  // Whether a pageable copy of `bytes` is large enough to stage.
  bool wants(size_t bytes) const { return threshold_ != 0 && bytes >= threshold_; }

  // Stage a copy on stream s (see staged_copy.hpp for when each returns).
  // False, with nothing done, when the backend cannot vouch that the device
  // range is one allocation (a piece could then fail halfway), when another
  // thread's staged copy holds the ring, or when the ring could not be
  // allocated (logged at debug once; staging stays off for the context).
  // Throws the backend's error when a DMA or a wait fails.
  bool h2d(backend::Backend& b, backend::DevPtr dst, const void* src, size_t bytes,
           backend::StreamHandle s);
  bool d2h(backend::Backend& b, void* dst, backend::DevPtr src, size_t bytes,
           backend::StreamHandle s);

  // Frees the ring (after its DMAs finish); at context destroy, before the
  // backend goes. The worker threads go with the Stager.
  void release(backend::Backend& b) noexcept;

 private:
  // The ring, or an empty lease; *fresh when this call allocated it.
  StagingRing::Lease take(StagingDevice& dev, bool* fresh);
  // Runs copy(lease) on the ring when it could be taken; the line about a
  // freshly allocated ring is logged once the lease is released, so that a
  // log callback never runs while this thread holds the ring.
  template <class Copy>
  bool with_ring(StagingDevice& dev, Copy&& copy);
  void log_ring_allocated() const;

  const size_t threshold_;
  const StorePolicy stores_;  // METRALE_STAGING_STORES
  StagingRing ring_;
  CopyWorkers workers_;
};

}  // namespace metrale::core::staging
