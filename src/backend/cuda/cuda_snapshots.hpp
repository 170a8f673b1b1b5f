// Host memory owned by a captured graph: the copies of the caller's source
// that copy_h2d_snapshot_async records from. A CUDA user object on the
// capturing graph owns each one; when the driver drops the last reference
// (graph and instantiations destroyed, replays done) its destructor runs on
// a driver thread, where no CUDA call is allowed, so it only hands the
// pointer here, and the backend frees it on its next snapshot or at exit.
#pragma once

#include <mutex>
#include <utility>
#include <vector>

namespace metrale::backend::cuda_impl {

class SnapshotReleases {
 public:
  void push(void* ptr) {
    std::lock_guard<std::mutex> lock(mutex_);
    released_.push_back(ptr);
  }
  std::vector<void*> take() {
    std::lock_guard<std::mutex> lock(mutex_);
    return std::exchange(released_, {});
  }

 private:
  std::mutex mutex_;
  std::vector<void*> released_;
};

}  // namespace metrale::backend::cuda_impl
