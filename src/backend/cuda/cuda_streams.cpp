// Streams and events.
#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {
StreamHandle CudaBackend::stream_create() {
  make_current();
  CUstream stream = nullptr;
  // Non-blocking: no implicit ordering with the legacy NULL stream, which
  // other libraries on the same primary context may be using.
  check(api_.streamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  return reinterpret_cast<StreamHandle>(stream);
}

// A stream of the CUDA runtime or of a framework (PyTorch passes its
// current cudaStream_t to a pluggable allocator). 0, the NULL stream, is
// the legacy default stream: it becomes CU_STREAM_LEGACY, which means the
// same to every driver call and keeps core's handle 0 free (core uses 0 for
// "the block's own stream"). The stream stays its owner's: never destroyed
// here.
StreamHandle CudaBackend::stream_wrap(uint64_t native, bool* owned) {
  *owned = false;
  if (native == 0) return reinterpret_cast<StreamHandle>(CU_STREAM_LEGACY);
  if (native == reinterpret_cast<uint64_t>(CU_STREAM_LEGACY) ||
      native == reinterpret_cast<uint64_t>(CU_STREAM_PER_THREAD)) {
    return native;
  }
  if (api_.streamGetCtx != nullptr) {
    make_current();
    CUcontext owner = nullptr;
    CUresult rc = api_.streamGetCtx(as_stream(native), &owner);
    if (rc == CUDA_ERROR_INVALID_HANDLE || rc == CUDA_ERROR_INVALID_VALUE ||
        rc == CUDA_ERROR_INVALID_CONTEXT) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "native stream " + std::to_string(native) + " is not a live CUDA stream (" +
               "cuStreamGetCtx answered " + std::to_string(static_cast<int>(rc)) + ")");
    }
    check(rc, "cuStreamGetCtx");
    if (owner != context_) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "native stream belongs to another CUDA context than this device's primary "
           "context, which this library uses");
    }
  }
  return native;
}

void CudaBackend::stream_destroy(StreamHandle s) {
  if (s == 0) return;
  make_current();
  CUresult rc = api_.streamDestroy(as_stream(s));
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuStreamDestroy_v2");
}

void CudaBackend::stream_synchronize(StreamHandle s) {
  make_current();
  // Core never syncs a capturing stream; another one may be waited for while
  // this thread captures (capture_mode.hpp).
  RelaxedCaptureMode relaxed(api_);
  check(api_.streamSynchronize(as_stream(s)), "cuStreamSynchronize");
}

bool CudaBackend::stream_is_capturing(StreamHandle s) {
  // A stream we created belongs to our context, so this read-only query is
  // first asked as is, without the cuCtxGetCurrent of make_current() (that
  // call was a third of the query's cost). Only when the driver refuses it
  // (no or another context current, a fault) is our context made current and
  // the query asked again, out of line; that answer, or its error, is the
  // one returned. The NULL stream means the current context's, so it always
  // gets make_current() first.
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (s != 0 && api_.streamIsCapturing(as_stream(s), &status) == CUDA_SUCCESS) [[likely]]
    return status != CU_STREAM_CAPTURE_STATUS_NONE;
  return stream_is_capturing_current(s);
}

bool CudaBackend::stream_is_capturing_current(StreamHandle s) {
  make_current();
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  check(api_.streamIsCapturing(as_stream(s), &status), "cuStreamIsCapturing");
  // An invalidated capture is still a capture until it is ended.
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

EventHandle CudaBackend::event_create(bool timing) {
  make_current();
  CUevent event = nullptr;
  check(api_.eventCreate(&event, timing ? CU_EVENT_DEFAULT : CU_EVENT_DISABLE_TIMING),
        "cuEventCreate");
  return reinterpret_cast<EventHandle>(event);
}

void CudaBackend::event_destroy(EventHandle e) {
  if (e == 0) return;
  make_current();
  CUresult rc = api_.eventDestroy(as_event(e));
  if (rc != CUDA_SUCCESS && !is_teardown_noop(rc)) raise(rc, "cuEventDestroy_v2");
}

// As launch_current: on a stream of ours first as is, without the
// cuCtxGetCurrent of make_current() (a refused record records nothing), and
// made again with our context current only when the driver refuses it. The
// NULL stream means the current context's, so it gets make_current() first.
[[gnu::hot]] void CudaBackend::event_record(EventHandle e, StreamHandle s) {
  if (s != 0 && api_.eventRecord(as_event(e), as_stream(s)) == CUDA_SUCCESS) return;
  make_current();
  check(api_.eventRecord(as_event(e), as_stream(s)), "cuEventRecord");
}

void CudaBackend::event_synchronize(EventHandle e) {
  make_current();
  // A wait, like cuStreamSynchronize of another stream: refused while this
  // thread captures unless relaxed, and the refusal invalidates the capture
  // (the pool waits for a destroyed stream's events while another stream of
  // the thread captures). Core never records its events into a capture.
  RelaxedCaptureMode relaxed(api_);
  check(api_.eventSynchronize(as_event(e)), "cuEventSynchronize");
}

bool CudaBackend::event_query(EventHandle e) {
  make_current();
  // A query is refused while another thread of the process captures in
  // global mode (PyTorch's default for its graphs), and the refusal
  // invalidates that thread's capture; the pool and the kernel timer query
  // from any thread. Relaxed mode permits it: PyTorch's own caching
  // allocator queries its events so (pytorch/pytorch PR 158352).
  RelaxedCaptureMode relaxed(api_);
  CUresult rc = api_.eventQuery(as_event(e));
  if (rc == CUDA_SUCCESS) return true;
  if (rc == CUDA_ERROR_NOT_READY) return false;
  raise(rc, "cuEventQuery");
}

float CudaBackend::event_elapsed_ms(EventHandle start, EventHandle end) {
  make_current();
  float ms = 0.0f;
  CUresult rc = api_.eventElapsedTime(&ms, as_event(start), as_event(end));
  if (rc == CUDA_ERROR_NOT_READY)
    raise(rc, "cuEventElapsedTime", "an event has not completed yet: synchronize it first");
  if (rc == CUDA_ERROR_INVALID_HANDLE)
    raise(rc, "cuEventElapsedTime",
          "both events must be recorded and created with timing enabled");
  check(rc, "cuEventElapsedTime");
  return ms;
}

void CudaBackend::stream_wait_event(StreamHandle s, EventHandle e) {
  make_current();
  check(api_.streamWaitEvent(as_stream(s), as_event(e), CU_EVENT_WAIT_DEFAULT),
        "cuStreamWaitEvent");
}

}  // namespace metrale::backend::cuda_impl
