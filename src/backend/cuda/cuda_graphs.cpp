// Graphs by stream capture: capture a stream's work, instantiate it, replay.
#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {
namespace {

CUgraphExec as_exec(GraphHandle g) { return reinterpret_cast<CUgraphExec>(g); }

// The driver answers ILLEGAL_STATE (401) for beginning a capture on a stream
// that is capturing already and for ending one on a stream that is not: a
// capture state error, which the ABI calls CAPTURE.
[[noreturn]] void fail_capture_state(const DriverApi& api, const char* function, CUresult rc,
                                     const char* why) {
  fail(METRALE_ERROR_CAPTURE, failure_message(&api, function, rc, why), static_cast<int>(rc));
}

}  // namespace

void CudaBackend::capture_begin(StreamHandle s) {
  make_current();
  // Thread-local mode: only this thread is barred from unsafe calls (a
  // cuMemAlloc, a context sync) while it captures; other threads of the
  // process keep working.
  CUresult rc = api_.streamBeginCapture(as_stream(s), CU_STREAM_CAPTURE_MODE_THREAD_LOCAL);
  if (rc == CUDA_ERROR_ILLEGAL_STATE)
    fail_capture_state(api_, "cuStreamBeginCapture_v2", rc, "the stream is already capturing");
  check(rc, "cuStreamBeginCapture_v2");
}

GraphHandle CudaBackend::capture_end(StreamHandle s) {
  make_current();
  CUgraph graph = nullptr;
  CUresult rc = api_.streamEndCapture(as_stream(s), &graph);
  if (rc != CUDA_SUCCESS) {
    // An invalidated capture still ends (the stream leaves capture mode);
    // whatever graph came back is of no use.
    if (graph != nullptr) api_.graphDestroy(graph);
    if (rc == CUDA_ERROR_ILLEGAL_STATE)
      fail_capture_state(api_, "cuStreamEndCapture", rc, "the stream is not capturing");
    raise(rc, "cuStreamEndCapture");
  }
  if (graph == nullptr)
    raise(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "cuStreamEndCapture", "no graph came back");
  CUgraphExec exec = nullptr;
  {
    // Instantiating is an unsafe call while this thread has another capture
    // open (two streams captured at once): probed on an H200, it fails with
    // STREAM_CAPTURE_UNSUPPORTED in thread-local mode. It touches neither
    // capture, so relaxed mode is right for it.
    RelaxedCaptureMode relaxed(api_);
    rc = api_.graphInstantiateWithFlags(&exec, graph, 0);
    // The executable graph is independent of the graph it was made from.
    api_.graphDestroy(graph);
  }
  check(rc, "cuGraphInstantiateWithFlags");
  return reinterpret_cast<GraphHandle>(exec);
}

void CudaBackend::capture_abort(StreamHandle s) {
  // Best effort by design: this runs on error paths, where the capture may
  // be invalidated or the stream gone; nothing here may throw over them.
  CUcontext current = nullptr;
  if (api_.ctxGetCurrent(&current) != CUDA_SUCCESS || current != context_)
    api_.ctxSetCurrent(context_);
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  // A failed query is treated as capturing (as core does): ending a stream
  // that was not capturing only returns an error, which is ignored.
  if (api_.streamIsCapturing(as_stream(s), &status) == CUDA_SUCCESS &&
      status == CU_STREAM_CAPTURE_STATUS_NONE)
    return;
  CUgraph graph = nullptr;
  api_.streamEndCapture(as_stream(s), &graph);
  if (graph != nullptr) api_.graphDestroy(graph);
}

void CudaBackend::graph_launch(GraphHandle g, StreamHandle s) {
  make_current();
  check(api_.graphLaunch(as_exec(g), as_stream(s)), "cuGraphLaunch");
}

void CudaBackend::graph_destroy(GraphHandle g) {
  if (g == 0) return;
  make_current();
  RelaxedCaptureMode relaxed(api_);  // beside another capture of this thread
  CUresult rc = api_.graphExecDestroy(as_exec(g));
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuGraphExecDestroy");
}

}  // namespace metrale::backend::cuda_impl
