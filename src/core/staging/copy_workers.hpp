// A small persistent thread pool that splits one host memcpy into parts, so
// that the host side of a staged copy (pageable <-> pinned) runs at the
// memory bandwidth of several cores instead of one. The threads start on the
// first copy large enough to split and live until the pool is destroyed: no
// thread is created per copy. The calling thread copies parts too.
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

  // Copies `bytes` from src to dst (which must not overlap), split over the
  // threads when it is large enough, every part stored with `mode`
  // (stream_copy.hpp); returns when every byte is copied.
  // Thread-safe: concurrent callers take turns.
  void copy(void* dst, const void* src, size_t bytes, StoreMode mode);

  // A series of copies by one caller, who holds the workers from
  // construction to destruction (other callers wait). start() hands a copy
  // to the workers and returns at once, so the caller can do other work
  // meanwhile (the staged h2d enqueues the previous piece's DMA); finish()
  // has the caller copy parts too and returns when every part is done. One
  // copy at a time: start() after finish(). The destructor finishes a
  // started copy.
  class Run {
   public:
    explicit Run(CopyWorkers& w) : w_(w), lock_(w.run_mutex_) {}
    ~Run() { finish(); }
    Run(const Run&) = delete;
    Run& operator=(const Run&) = delete;
    void start(void* dst, const void* src, size_t bytes, StoreMode mode);
    void finish() noexcept;

   private:
    CopyWorkers& w_;
    std::unique_lock<std::mutex> lock_;
    bool started_ = false;
  };

  unsigned threads() const { return threads_; }

#ifdef METRALE_TEST_SEAMS
  // Tests only (tests/meson.build builds test_staging_core's own copy of
  // these sources with it; the library never has it): called by a worker
  // after it read a job and before it claims a part, so a test can stall
  // it there, the window a preempted worker hits.
  static inline std::atomic<void (*)(uint32_t gen)> test_before_claim{nullptr};
#endif

  // Below this many bytes per thread, waking a thread costs more than it saves.
  static constexpr size_t kMinPart = size_t{256} << 10;
  // Parts are claimed, not assigned: about two per thread, at least this
  // long, so that a thread that starts late (the caller, busy with a DMA)
  // or runs slow leaves its share to the others instead of holding up the
  // whole copy.
  static constexpr size_t kMinClaim = size_t{64} << 10;

 private:
  struct Job {
    unsigned char* dst = nullptr;
    const unsigned char* src = nullptr;
    size_t bytes = 0;
    size_t part = 0;     // bytes per part (the last one may be shorter)
    uint32_t parts = 0;
    uint32_t gen = 0;    // which copy: a worker late for one claims nothing of the next
    StoreMode mode = StoreMode::kCached;  // always set by start()
  };

  // One worker's mailbox: the caller writes job, then bumps seq (release).
  // Only the workers a copy needs are woken, so a copy in 2 parts never
  // wakes the 7 others.
  struct Slot {
    std::mutex mutex;
    std::condition_variable wake;
    std::atomic<uint64_t> seq{0};
    Job job;
    bool stop = false;  // under mutex
  };

  void start_locked();  // under run_mutex_
  void worker_main(Slot* slot);
  // Claims the next part of job; false when its parts are all claimed or
  // it is no longer the current copy.
  bool claim(const Job& job, uint32_t* part);
  // Claims and copies parts of job until none is left.
  void copy_claimed(const Job& job);
  static void copy_part(const Job& job, uint32_t index);

  const unsigned threads_;
  std::mutex run_mutex_;                      // held by a Run
  std::vector<std::unique_ptr<Slot>> slots_;  // threads_ - 1, once started
  std::vector<std::thread> pool_;

  Job job_;                            // the current copy (the caller's copy of it)
  std::atomic<uint64_t> claim_{0};     // (gen << 32) | next unclaimed part
  // Parts not yet copied; whoever copies the last one wakes the caller if
  // it went to sleep.
  std::atomic<uint32_t> remaining_{0};
  std::mutex done_mutex_;
  std::condition_variable done_;
};

}  // namespace metrale::core::staging
