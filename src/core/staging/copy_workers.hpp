// A small persistent thread pool that splits one host memcpy into parts, so
// that the host side of a staged copy (pageable <-> pinned) runs at the
// memory bandwidth of several cores instead of one. The threads start on the
// first copy large enough to split and live until the pool is destroyed: no
// thread is created per copy. The calling thread copies one part itself.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "core/staging/stream_copy.hpp"

namespace metrale::core::staging {

class CopyWorkers {
 public:
  // `threads` counts the caller: 1 means every copy runs in the caller's
  // thread and no thread is ever started.
  explicit CopyWorkers(unsigned threads);
  ~CopyWorkers();  // joins the threads
  CopyWorkers(const CopyWorkers&) = delete;
  CopyWorkers& operator=(const CopyWorkers&) = delete;

  // Copies `bytes` from src to dst (which must not overlap) in up to
  // threads() parts of at least kMinPart bytes each, and returns when every
  // part is done, every part stored with `mode` (stream_copy.hpp).
  // Thread-safe: concurrent callers take turns.
  void copy(void* dst, const void* src, size_t bytes, StoreMode mode);

  unsigned threads() const { return threads_; }

  // Below this many bytes per part, waking a thread costs more than it saves.
  static constexpr size_t kMinPart = size_t{256} << 10;

 private:
  struct Job {
    unsigned char* dst = nullptr;
    const unsigned char* src = nullptr;
    size_t bytes = 0;
    size_t part = 0;    // bytes per part (the last one may be shorter)
    unsigned index = 0;  // which part this worker copies
    StoreMode mode = StoreMode::kCached;  // always set by copy()
  };

  // One worker's mailbox: the caller writes job, then bumps seq (release);
  // the worker copies its part and decrements remaining_. Only the workers a
  // copy needs are woken, so a copy in 2 parts never wakes the 7 others.
  struct Slot {
    std::mutex mutex;
    std::condition_variable wake;
    std::atomic<uint64_t> seq{0};
    Job job;
    bool stop = false;  // under mutex
  };

  void start_locked();  // under run_mutex_
  void worker_main(Slot* slot);
  static void copy_part(const Job& job, unsigned index);

  const unsigned threads_;
  std::mutex run_mutex_;                      // one copy at a time
  std::vector<std::unique_ptr<Slot>> slots_;  // threads_ - 1, once started
  std::vector<std::thread> pool_;

  // Parts still being copied by workers; the last one to finish wakes the
  // caller if it went to sleep.
  std::atomic<unsigned> remaining_{0};
  std::mutex done_mutex_;
  std::condition_variable done_;
};

}  // namespace metrale::core::staging
