// The backend's destroy of a stream or event the caller destroyed, delayed.
//
// A call on another thread may have found the handle live just before the
// destroy and still be on its way to the backend with its backend handle
// (rule 2 calls that a race in the caller, and promises the call acts as
// before the destroy or is refused). A destroyed CUstream or CUevent is a
// dangling pointer that can crash the driver, so the backend object lives
// until HandleGraveyard::kKeep more of its kind die after it: as long as the slot of the
// handle stays unused (rule 2's window). Streams die under
// stream_handles_mutex_ (a scan's settle uses live streams' handles under
// it) but never wait for it: a destroy from a host kernel whose stream the
// settle is queuing on would deadlock. When the settle holds it, the
// overdue handles wait for the next release.
#include "core/context.hpp"
#include "core/log.hpp"

using metrale::Error;

namespace {

// A lost context still gives the handle back: destroy is a release, not
// work. Any other failure can only be logged: the caller's destroy
// returned long ago.
template <class Destroy>
void destroy_logged(metrale::core::FaultLatch& fault, const char* what,
                    Destroy&& destroy) noexcept {
  try {
    try {
      destroy();
    } catch (const Error& e) {
      if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault.latch(e.what());
      if (fault.lost()) return;
      metrale::core::log().warn("destroying {}'s backend object failed: {}", what, e.what());
    }
  } catch (...) {
    // No memory to latch or log it: the handle is gone either way.
  }
}

}  // namespace

void metrale_context::destroy_backend_stream(StreamHandle h) noexcept {
  destroy_logged(fault_, "a stream", [&] { backend_->stream_destroy(h); });
}

void metrale_context::release_stream_handle(StreamHandle h) noexcept {
  const bool kept = stream_graveyard_.bury(h);
  std::unique_lock<std::mutex> hold(stream_handles_mutex_, std::try_to_lock);
  if (!hold.owns_lock()) {
    if (!kept) metrale::core::log().warn("a destroyed stream's backend object leaked (no memory)");
    return;
  }
  if (!kept) destroy_backend_stream(h);
  uint64_t old = 0;
  while (stream_graveyard_.take_overdue(&old)) destroy_backend_stream(old);
}

void metrale_context::release_event_handle(EventHandle h) noexcept {
  auto destroy = [&](EventHandle e) {
    destroy_logged(fault_, "an event", [&] { backend_->event_destroy(e); });
  };
  if (!event_graveyard_.bury(h)) destroy(h);
  uint64_t old = 0;
  while (event_graveyard_.take_overdue(&old)) destroy(old);
}

void metrale_context::release_buried_handles() noexcept {
  std::vector<uint64_t> events, streams;
  try {
    events = event_graveyard_.take_all();
    streams = stream_graveyard_.take_all();
  } catch (const std::bad_alloc&) {
    metrale::core::log().warn("destroyed streams' and events' backend objects leaked (no memory)");
  }
  for (uint64_t e : events) destroy_logged(fault_, "an event", [&] { backend_->event_destroy(e); });
  for (uint64_t s : streams) destroy_backend_stream(s);
}
