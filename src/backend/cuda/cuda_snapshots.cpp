// copy_h2d_snapshot_async: a host-to-device copy recorded into a capture
// without the graph keeping the caller's pointer.
//
// What the driver itself does (probed on an H200, driver 580 / CUDA 13.0, in
// global, thread-local and relaxed capture modes):
//   cuMemcpyHtoDAsync, pageable/pinned/registered src: OK, one memcpy node
//     that reads src again at every replay (no snapshot);
//   cuMemcpyDtoHAsync, all three kinds: one memcpy node writing the caller's
//     buffer at every replay;
//   cuMemsetD8Async on a mapped pinned/registered host pointer: a memset node
//     writing host memory at replay; on a pageable pointer the capture
//     succeeds and cuGraphInstantiate fails (INVALID_VALUE);
//   cuGraphLaunch into a capturing stream: STREAM_CAPTURE_UNSUPPORTED, and
//     the capture is invalidated (core refuses it first);
//   a user object retained by the capturing graph (cuStreamGetCaptureInfo_v2
//     gives the graph) has its destructor run about 1 ms after the graph
//     (never instantiated) or its last exec is destroyed and synchronized.
// So a plain captured copy keeps the caller's buffer. Here the bytes are
// copied now into page-locked memory that a user object on the capturing
// graph owns, and the node reads from that (probed: replays write the bytes
// of call time; the destructor ran).
#include <cstring>
#include <memory>

#include "backend/cuda/capture_mode.hpp"
#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend::cuda_impl {
namespace {


// What the user object's destructor gets.
struct OwnedSnapshot {
  std::shared_ptr<SnapshotReleases> releases;
  void* ptr;
};

// Runs on a driver thread: no CUDA call allowed, so hand the memory back.
void CUDA_CB release_snapshot(void* user) {
  std::unique_ptr<OwnedSnapshot> owned(static_cast<OwnedSnapshot*>(user));
  owned->releases->push(owned->ptr);
}

bool can_snapshot(const DriverApi& api) {
  return api.threadExchangeStreamCaptureMode != nullptr && api.streamGetCaptureInfo != nullptr &&
         api.userObjectCreate != nullptr && api.userObjectRelease != nullptr &&
         api.graphRetainUserObject != nullptr;
}

}  // namespace

void CudaBackend::free_released_snapshots() noexcept {
  std::vector<void*> released = snapshot_releases_->take();
  if (released.empty()) return;
  if (api_.threadExchangeStreamCaptureMode == nullptr) return;
  RelaxedCaptureMode relaxed(api_);
  for (void* p : released) api_.memFreeHost(p);
}

void CudaBackend::copy_h2d_snapshot_async(DevPtr dst, const void* src, size_t bytes,
                                          StreamHandle s) {
  make_current();
  if (bytes == 0) return;
  if (!can_snapshot(api_)) {
    fail(METRALE_ERROR_CAPTURE,
         "this driver has no user objects (CUDA 11.3+), so a graph cannot own a copy of the "
         "source; nothing was recorded. Use metrale_copy_h2d_async_retained and keep src "
         "until the graph is destroyed");
  }
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  cuuint64_t id = 0;
  CUgraph graph = nullptr;
  check(api_.streamGetCaptureInfo(as_stream(s), &status, &id, &graph, nullptr, nullptr),
        "cuStreamGetCaptureInfo_v2");
  if (status == CU_STREAM_CAPTURE_STATUS_NONE) {
    // Not capturing any more: copy and wait, so src is free on return.
    check(api_.memcpyHtoDAsync(static_cast<CUdeviceptr>(dst), src, bytes, as_stream(s)),
          "cuMemcpyHtoDAsync_v2");
    RelaxedCaptureMode relaxed(api_);  // another capture of this thread stays valid
    check(api_.streamSynchronize(as_stream(s)), "cuStreamSynchronize");
    return;
  }
  if (status != CU_STREAM_CAPTURE_STATUS_ACTIVE || graph == nullptr) {
    raise(CUDA_ERROR_STREAM_CAPTURE_INVALIDATED, "cuStreamGetCaptureInfo_v2",
          "the capture is invalidated; nothing was recorded");
  }
  free_released_snapshots();

  void* snapshot = nullptr;
  CUresult rc;
  {
    RelaxedCaptureMode relaxed(api_);
    rc = api_.memHostAlloc(&snapshot, bytes, 0);
  }
  check(rc, "cuMemHostAlloc", "page-locked memory for the graph's copy of the source");
  std::memcpy(snapshot, src, bytes);

  auto give_back = [&] {
    RelaxedCaptureMode relaxed(api_);
    api_.memFreeHost(snapshot);
  };
  OwnedSnapshot* owned = nullptr;
  try {
    owned = new OwnedSnapshot{snapshot_releases_, snapshot};
  } catch (...) {
    give_back();
    throw;
  }
  CUuserObject object = nullptr;
  rc = api_.userObjectCreate(&object, owned, release_snapshot, 1,
                             CU_USER_OBJECT_NO_DESTRUCTOR_SYNC);
  if (rc != CUDA_SUCCESS) {
    delete owned;
    give_back();
    raise(rc, "cuUserObjectCreate");
  }
  // The graph takes our reference: the snapshot now lives as long as it.
  rc = api_.graphRetainUserObject(graph, object, 1, CU_GRAPH_USER_OBJECT_MOVE);
  if (rc != CUDA_SUCCESS) {
    api_.userObjectRelease(object, 1);  // the destructor hands the memory back
    raise(rc, "cuGraphRetainUserObject");
  }
  // Should this fail, the snapshot is still freed with the graph.
  check(api_.memcpyHtoDAsync(static_cast<CUdeviceptr>(dst), snapshot, bytes, as_stream(s)),
        "cuMemcpyHtoDAsync_v2");
}

}  // namespace metrale::backend::cuda_impl
