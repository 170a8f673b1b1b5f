// metrale_context::stream_is_capturing, inline in the API shim that calls
// it: the query's own cost is a few ns over the driver's (issue 10 counts
// each one), and a header of its own keeps a change to it from rebuilding
// every file that includes context.hpp.
#pragma once

#include "core/context.hpp"

inline bool metrale_context::stream_is_capturing(metrale_stream* s) {
  const StreamHandle h = stream_of(s)->handle;
  if (fault_.lost()) return true;  // a failed query counts as capturing
  try {
    return backend_->stream_is_capturing(h);
  } catch (const metrale::Error& e) {
    if (e.status() == METRALE_ERROR_CONTEXT_LOST) fault_.latch(e.what());
    return true;
  }
}
