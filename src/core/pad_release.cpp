// Freed padded pool blocks back to the pool once their check has read
// their pad (pad_verify_ops.cpp's pass, pad_check_ordered.cpp's ordered
// one), each with the range of it that holds the pattern now.
#include "core/context.hpp"
#include "core/format.hpp"
#include "core/log.hpp"
#include "core/pool/free_own_run.hpp"

using metrale::core::PendingPad;
using metrale::core::pool::Block;
using metrale::core::pool::PatternRange;

// The common end of a pass: every block intact and no red-zone pass open
// (none can have these pads in its snapshot: see ScanFence), so all go
// back under one lock of the pool.
void metrale_context::release_all_intact(const std::vector<PendingPad>& ready) noexcept {
  if (chunk_source_->annotating()) {
    for (const PendingPad& p : ready) chunk_source_->block_returned(p.ptr);
  }
  DevPtr lost = 0;  // one a warning names, after the lock (a log callback may call in)
  size_t lost_count = 0;
  {
    std::lock_guard<metrale::core::FastMutex> lock(pool_->lock());
    // Used on its own stream only and freed there (the common case): into
    // its bins, a run of one size at once, as free_held would, with no event
    // to record. The pool stops at any other block, which goes on its own.
    const auto own = [&](size_t i) {
      const PendingPad& p = ready[i];
      Block* b = p.entry.block;
      return metrale::core::pool::CachingPool::OwnFree{
          b, p.stream != 0 ? p.stream : b->stream, PatternRange{p.check_from, p.check_to}};
    };
    for (size_t i = 0; i < ready.size(); ++i) {
      i = pool_->free_own_run_held(i, ready.size(), own);
      if (i == ready.size()) break;
      const PendingPad& p = ready[i];
      Block* b = p.entry.block;
      const PatternRange checked{p.check_from, p.check_to};
      try {
        pool_->free_held(b, p.stream != 0 ? p.stream : b->stream, checked);
      } catch (...) {
        // No memory for the freeing stream's state or its event, or an
        // event record failed: the block stays handed out (the pool's
        // rule) and waits on the list for the next pass, which frees it
        // then; lost to reuse (never handed out twice) only when the list
        // has no room.
        chunk_source_->block_handed_out(p.ptr, p.entry.bytes + p.entry.pad);
        release_failures_.fetch_add(1, std::memory_order_relaxed);
        try {
          pad_verify_.emplace_held(p);  // its mutex is the pool's, held
          pad_verify_.commit_held();
        } catch (...) {
          if (lost_count++ == 0) lost = p.ptr;
        }
      }
    }
  }
  if (lost_count != 0) {
    metrale::core::log().warn("{} freed block(s), the first at {}, could not go back to the pool "
                              "after their red-zone check (out of host memory) and stay unusable "
                              "until the context is destroyed",
                              lost_count, metrale::core::hex(lost));
  }
}

void metrale_context::release_checked(const PendingPad& p, PatternRange pattern) noexcept {
  Block* b = p.entry.block;
  try {
    // A red-zone pass open since before the free may still read the pad.
    if (p.stream != 0) pool_->set_stream(b, p.stream);
    if (scan_fence_.hold(p.ptr, b)) return;  // released by the pass, no record
    chunk_source_->block_returned(p.ptr);
    device([&] {
      if (p.stream != 0) {
        pool_->free_on(b, p.stream, pattern);
      } else {
        pool_->free(b, pattern);
      }
    });
  } catch (const std::exception& ex) {
    metrale::core::log().debug("returning {} to the pool after its red-zone check failed: {}",
                               metrale::core::hex(p.ptr), ex.what());
  } catch (...) {
    metrale::core::log().debug("returning {} to the pool after its red-zone check failed",
                               metrale::core::hex(p.ptr));
  }
}
