// The objects behind metrale_stream_t, metrale_event_t and metrale_graph_t.
// Callers never hold their addresses: they hold handle values (see
// handle_id.hpp) that the owning context's SlotTable maps back to these
// objects. The public struct tags (struct metrale_stream, ...) stay
// incomplete inside the library, so a caller's handle cannot be
// dereferenced by mistake; look it up (stream_of, event_of, graph_of).
#pragma once

#include <atomic>

#include "backend/backend.hpp"
#include "core/handle_id.hpp"
#include "core/slot_table.hpp"

struct metrale_context;

namespace metrale::core {

struct StreamObj {
  metrale_context* owner = nullptr;
  backend::StreamHandle handle = 0;
  uint64_t id = 0;  // the caller's handle value (the event log names streams by it)
  bool is_default = false;
  // Made by metrale_stream_wrap around a native stream (native: its key in
  // the context's wrap table).
  // owns_backend false: the backend stream is the caller's and is never
  // destroyed by this library (stream_wrap.cpp).
  bool wrapped = false;
  bool owns_backend = true;
  uint64_t native = 0;
  // A capture begun through the API is open on it (counted in the
  // context's captures_open_ until it closes).
  std::atomic<bool> capture_counted{false};
};

struct EventObj {
  metrale_context* owner = nullptr;
  backend::EventHandle handle = 0;
  bool timing = true;
  std::atomic<bool> recorded{false};
};

struct GraphObj {
  metrale_context* owner = nullptr;
  backend::GraphHandle handle = 0;
  // Launches between their lookup and the backend's answer: a destroy
  // waits for them before the backend destroys the graph (streams.cpp).
  // Signed: a launch that lost a race with more than 64 deaths (rule 2's
  // window) may count down a reused slot's fresh counter.
  std::atomic<int32_t> launching{0};
};

}  // namespace metrale::core
