// Graphs by stream capture: while a stream captures, its ops are recorded
// (HostStream::submit); ending the capture turns the list into a graph, and
// launching the graph replays the list in order as one op of the target
// stream (core refuses a launch into a capturing stream, as CUDA does).
#include <mutex>
#include <utility>

#include "backend/host/host_backend.hpp"

namespace metrale::backend::host {

void HostBackend::capture_begin(StreamHandle s) {
  auto stream = usable_stream(s);
  std::lock_guard<StreamLock> lock(stream->mutex);
  if (stream->capturing) {
    fail(METRALE_ERROR_CAPTURE, "host backend: the stream is already capturing");
  }
  stream->captured.clear();
  stream->capture_invalidated = false;
  stream->capturing = true;
}

GraphHandle HostBackend::capture_end(StreamHandle s) {
  auto stream = usable_stream(s);
  // The graph and its handle before the capture ends (what may run out of
  // memory): a failure leaves the capture open with what it recorded.
  auto graph = std::make_shared<HostGraph>();
  const GraphHandle handle = graphs_.add(graph);
  std::vector<StreamOp> dropped;
  {
    std::lock_guard<StreamLock> lock(stream->mutex);
    if (!stream->capturing || stream->capture_invalidated) {
      const bool invalidated = stream->capturing;
      dropped.swap(stream->captured);
      stream->capturing = false;
      stream->capture_invalidated = false;
      graphs_.take(handle);
      if (!invalidated) {
        fail(METRALE_ERROR_CAPTURE, "host backend: capture_end on a stream that is not capturing");
      }
      fail(METRALE_ERROR_CAPTURE,
           "host backend: the capture was invalidated by a stream synchronize made during it "
           "(as the driver's capture is); it recorded nothing");
    }
    graph->ops.swap(stream->captured);
    stream->capturing = false;
  }
  return handle;
}

// Allowed on a lost context: it only drops recorded work.
void HostBackend::capture_abort(StreamHandle s) {
  auto stream = streams_.get(s);
  std::vector<StreamOp> dropped;
  std::lock_guard<StreamLock> lock(stream->mutex);
  if (!stream->capturing) return;
  dropped.swap(stream->captured);
  stream->capturing = false;
}

void HostBackend::graph_launch(GraphHandle g, StreamHandle s) {
  auto stream = usable_stream(s);
  std::shared_ptr<const HostGraph> graph = graphs_.get(g);
  stream->submit([graph] { graph->replay(); });
}

void HostBackend::graph_destroy(GraphHandle g) { graphs_.take(g); }

}  // namespace metrale::backend::host
