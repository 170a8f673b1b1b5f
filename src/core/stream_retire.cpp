// The end of metrale_stream_destroy: the pool retires the stream's handle
// (after its work: pool_streams.cpp) and hands it to the backend's
// delayed destroy (backend_release.cpp).
//
// A red-zone pass (pad_verify_ops.cpp) takes its blocks off the check list
// and frees them on the streams they were freed on; a destroy's retarget of
// the list does not reach a batch already taken. Had the pool retired the
// stream before the pass frees such a block there, the pool would keep a
// state for a dead stream (its event records fail for good: later trims
// and allocations fail, the block stays handed out). So with red zones on,
// retiring never runs beside a pass: under verify_mutex_. A destroy that
// must not wait for a pass (inside a host kernel, whose stream the pass
// may be waiting for, or inside the pass itself) queues its retirement, and
// whoever holds the mutex runs the queue when it lets go.
#include "core/context.hpp"
#include "core/log.hpp"

using metrale::Error;

void metrale_context::retire_stream_handle(Retirement r) {
  const bool passes = pool_ != nullptr && opts_.redzone_bytes > 0;
  if (!passes) {
    if (!finish_retirement(r)) queue_retirement(r);
    drain_retirements();  // earlier ones a wait cycle put off
    return;
  }
  if (!in_verify_pass() && !backend_->in_stream_work(0)) {
    {
      std::lock_guard<std::mutex> serial(verify_mutex_);
      // The retirement may log (a user callback may call back in).
      const bool was = mark_verify_pass(true);
      if (!finish_retirement(r)) queue_retirement(r);
      run_retirements_locked();
      mark_verify_pass(was);
    }
    drain_retirements();
    run_wanted_pass();  // a free that found the mutex held above
    return;
  }
  if (!queue_retirement(r)) return;
  // Inside a pass the pass runs it as it ends; else whoever holds the mutex.
  if (!in_verify_pass()) drain_retirements();
}

bool metrale_context::queue_retirement(const Retirement& r) noexcept {
  try {
    std::lock_guard<std::mutex> lock(retire_mutex_);
    retire_later_.push_back(r);
    return true;
  } catch (const std::bad_alloc&) {
    // No room to queue it: at once, as without red zones; put off by a
    // wait cycle, the backend stream stays (leaked rather than reused while
    // the pool still orders blocks on it).
    finish_retirement(r);
    return false;
  }
}

bool metrale_context::finish_retirement(const Retirement& r) noexcept {
  hand_freed_blocks_to_heir(r.handle);
  if (pool_) {
    try {
      retarget_deferred(r.handle);
      pool_->retire_stream(r.handle, default_stream_->handle);
    } catch (const Error& e) {
      if (e.status() == METRALE_ERROR_INVALID_ARGUMENT) {
        // Its work waits for this thread (a host kernel that destroyed the
        // stream): the pool keeps ordering its blocks on it, and the
        // backend stream lives on until a later retirement succeeds (the
        // next stream destroy, trim or verify pass, at the latest the
        // context's destroy). The handle is dead already.
        metrale::core::log().debug("pool: retiring a stream put off: {}", e.what());
        return false;
      }
      metrale::core::log().debug("pool: retiring stream failed: {}", e.what());
    } catch (const std::exception& ex) {
      metrale::core::log().debug("pool: retiring stream failed: {}", ex.what());
    }
  }
  if (!r.owns_backend) return true;  // the native stream stays its owner's
  release_stream_handle(r.handle);    // later, when calls racing the destroy are gone
  return true;
}

void metrale_context::hand_freed_blocks_to_heir(StreamHandle gone) noexcept {
  const StreamHandle heir = default_stream_->handle;
  // A padded block waiting for its check (which runs on the stream it was
  // freed on) or a quarantined one (freed there when it leaves) may still be
  // used by work queued on `gone`; the default stream is not ordered after
  // that work, so it is waited for first: a check read the pad before the
  // kernels that fill it had run, and reported bytes no one overwrote. Under
  // verify_mutex_ with red zones on (the caller's), so no pass takes a block
  // naming `gone` between the wait and the move.
  const bool held = pad_verify_.count() != 0 || (quarantine_ && quarantine_->bytes() != 0);
  if (pool_ && held) {
    try {
      backend_->stream_synchronize(gone);
    } catch (const std::exception& ex) {
      // Lost device or a native stream capturing: the blocks move anyway
      // (nothing may name a dead stream); at worst a check reads too early.
      metrale::core::log().debug("waiting for a destroyed stream's work failed: {}", ex.what());
    }
  }
  if (quarantine_) quarantine_->retarget(gone, heir);
  pad_verify_.retarget(gone, heir);
}

bool metrale_context::run_retirements_locked() noexcept {
  std::vector<Retirement> todo;
  {
    std::lock_guard<std::mutex> lock(retire_mutex_);
    todo.swap(retire_later_);
  }
  size_t put_off = 0;
  for (const Retirement& r : todo) {
    if (finish_retirement(r)) continue;
    ++put_off;
    queue_retirement(r);  // again, for a later try
  }
  return put_off < todo.size();
}

void metrale_context::drain_retirements(bool then_wanted) noexcept {
  // A destroy queues before it tries the mutex, and a holder looks again
  // after letting go: one of the two runs every queued retirement. Ones put
  // off again (a wait cycle) stay queued for a later drain.
  bool held = false;
  for (;;) {
    {
      std::lock_guard<std::mutex> lock(retire_mutex_);
      if (retire_later_.empty()) break;
    }
    std::unique_lock<std::mutex> serial(verify_mutex_, std::try_to_lock);
    if (!serial.owns_lock()) break;  // its holder looks after letting go
    held = true;
    const bool was = mark_verify_pass(true);
    const bool progress = run_retirements_locked();
    mark_verify_pass(was);
    if (!progress) break;
  }
  // A free that found the mutex held here left its pass to this holder.
  if (held && then_wanted && !in_verify_pass()) run_wanted_pass();
}
