// CopyWorkers: a job goes to every worker at once; each copies its part (or
// nothing when the copy has fewer parts) and reports back. Between the pieces
// of one staged copy the workers spin briefly so that the next piece does not
// pay a futex wake-up; after that they sleep on a condition variable.
#include "core/staging/copy_workers.hpp"

#include <chrono>
#include <cstring>

namespace metrale::core::staging {

namespace {

inline void cpu_relax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#endif
}

// How long a worker or the caller spins before it sleeps.
constexpr auto kSpin = std::chrono::microseconds(50);

// Spins until pred() holds or kSpin passed; returns pred().
template <class Pred>
bool spin_until(Pred pred) {
  const auto until = std::chrono::steady_clock::now() + kSpin;
  for (unsigned i = 1;; ++i) {
    if (pred()) return true;
    cpu_relax();
    if ((i & 63) == 0 && std::chrono::steady_clock::now() >= until) return pred();
  }
}

}  // namespace

CopyWorkers::CopyWorkers(unsigned threads) : threads_(threads == 0 ? 1 : threads) {}

CopyWorkers::~CopyWorkers() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stop_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : pool_) t.join();
}

void CopyWorkers::start_locked() {
  if (!pool_.empty() || threads_ == 1) return;
  pool_.reserve(threads_ - 1);
  // A thread that cannot be started leaves the pool smaller; copy() splits
  // over the threads it has.
  try {
    for (unsigned i = 1; i < threads_; ++i) pool_.emplace_back([this, i] { worker_main(i); });
  } catch (const std::system_error&) {
  }
}

void CopyWorkers::copy_part(const Job& job, unsigned index) {
  const size_t first = job.part * index;
  if (first >= job.bytes) return;
  const size_t n = job.bytes - first < job.part ? job.bytes - first : job.part;
  std::memcpy(job.dst + first, job.src + first, n);
}

void CopyWorkers::copy(void* dst, const void* src, size_t bytes) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> run(run_mutex_);
  size_t parts = bytes / kMinPart;
  if (parts > threads_) parts = threads_;
  if (parts > 1) start_locked();
  if (parts > pool_.size() + 1) parts = pool_.size() + 1;
  if (parts <= 1) {
    std::memcpy(dst, src, bytes);
    return;
  }
  // Parts are whole pages (but the last) so that no two threads write the
  // same cache line or page.
  constexpr size_t kPage = 4096;
  size_t part = (bytes + parts - 1) / parts;
  part = (part + kPage - 1) & ~(kPage - 1);
  Job job{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes, part};
  {
    std::lock_guard<std::mutex> lock(mutex_);
    job_ = job;
    remaining_.store(static_cast<unsigned>(pool_.size()), std::memory_order_relaxed);
    generation_.fetch_add(1, std::memory_order_release);
  }
  wake_.notify_all();
  copy_part(job, 0);
  auto finished = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(mutex_);
    done_.wait(lock, finished);
  }
}

void CopyWorkers::worker_main(unsigned index) {
  uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] { return generation_.load(std::memory_order_acquire) != seen; };
    if (!spin_until(fresh)) {
      std::unique_lock<std::mutex> lock(mutex_);
      wake_.wait(lock, [&] { return stop_ || fresh(); });
      if (stop_) return;
    }
    seen = generation_.load(std::memory_order_acquire);
    // job_ was written before the generation was published, and is not
    // rewritten until every worker (this one included) has reported.
    copy_part(job_, index);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace metrale::core::staging
