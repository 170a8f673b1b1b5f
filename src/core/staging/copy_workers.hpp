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
#include <mutex>
#include <thread>
#include <vector>

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
  // part is done. Thread-safe: concurrent callers take turns.
  void copy(void* dst, const void* src, size_t bytes);

  unsigned threads() const { return threads_; }

  // Below this many bytes per part, waking a thread costs more than it saves.
  static constexpr size_t kMinPart = size_t{256} << 10;

 private:
  struct Job {
    unsigned char* dst = nullptr;
    const unsigned char* src = nullptr;
    size_t bytes = 0;
    size_t part = 0;  // bytes per part (the last one may be shorter)
  };

  void start_locked();  // under run_mutex_
  void worker_main(unsigned index);
  static void copy_part(const Job& job, unsigned index);

  const unsigned threads_;
  std::mutex run_mutex_;             // one copy at a time
  std::vector<std::thread> pool_;    // threads_ - 1 of them, once started

  // Hand-off between the caller and the workers. A job is published by
  // bumping generation_ (release) after writing job_; every worker answers
  // every generation by decrementing remaining_, so job_ is never rewritten
  // while a worker may still read it.
  std::mutex mutex_;
  std::condition_variable wake_;  // workers wait here for a new generation
  std::condition_variable done_;  // the caller waits here for remaining_ == 0
  Job job_;
  std::atomic<uint64_t> generation_{0};
  std::atomic<unsigned> remaining_{0};
  bool stop_ = false;  // under mutex_
};

}  // namespace metrale::core::staging
