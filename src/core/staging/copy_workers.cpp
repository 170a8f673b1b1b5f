// CopyWorkers: the caller hands parts 1..n-1 of a copy to n-1 workers through
// their own mailboxes, copies part 0 itself and waits for the others. Between
// the pieces of one staged copy the workers spin briefly so that the next
// piece does not pay a futex wake-up; after that they sleep.
#include "core/staging/copy_workers.hpp"

#include <chrono>
#include <cstring>
#include <system_error>

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
  for (auto& slot : slots_) {
    {
      std::lock_guard<std::mutex> lock(slot->mutex);
      slot->stop = true;
    }
    slot->wake.notify_one();
  }
  for (std::thread& t : pool_) t.join();
}

void CopyWorkers::start_locked() {
  if (!pool_.empty() || threads_ == 1) return;
  // A thread that cannot be started leaves the pool smaller; copy() splits
  // over the threads it has.
  try {
    for (unsigned i = 1; i < threads_; ++i) {
      slots_.push_back(std::make_unique<Slot>());
      Slot* slot = slots_.back().get();
      pool_.emplace_back([this, slot] { worker_main(slot); });
    }
  } catch (const std::system_error&) {
    slots_.resize(pool_.size());
  }
}

void CopyWorkers::copy_part(const Job& job, unsigned index) {
  const size_t first = job.part * index;
  if (first >= job.bytes) return;
  const size_t n = job.bytes - first < job.part ? job.bytes - first : job.part;
  copy_bytes(job.mode, job.dst + first, job.src + first, n);
}

void CopyWorkers::copy(void* dst, const void* src, size_t bytes, StoreMode mode) {
  if (bytes == 0) return;
  std::lock_guard<std::mutex> run(run_mutex_);
  size_t parts = bytes / kMinPart;
  if (parts > threads_) parts = threads_;
  if (parts > 1) start_locked();
  if (parts > pool_.size() + 1) parts = pool_.size() + 1;
  if (parts <= 1) {
    copy_bytes(mode, dst, src, bytes);
    return;
  }
  // Parts are whole pages (but the last) so that no two threads write the
  // same cache line or page; rounding may leave fewer parts.
  constexpr size_t kPage = 4096;
  size_t part = (bytes + parts - 1) / parts;
  part = (part + kPage - 1) & ~(kPage - 1);
  parts = (bytes + part - 1) / part;
  Job job{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes, part, 0,
          mode};
  remaining_.store(static_cast<unsigned>(parts - 1), std::memory_order_relaxed);
  for (unsigned i = 1; i < parts; ++i) {
    Slot& slot = *slots_[i - 1];
    {
      // The worker reads job only after it saw seq move, and has finished
      // with the previous one (remaining_ reached 0 before this copy began).
      std::lock_guard<std::mutex> lock(slot.mutex);
      slot.job = job;
      slot.job.index = i;
      slot.seq.fetch_add(1, std::memory_order_release);
    }
    slot.wake.notify_one();
  }
  copy_part(job, 0);
  auto finished = [&] { return remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(done_mutex_);
    done_.wait(lock, finished);
  }
}

void CopyWorkers::worker_main(Slot* slot) {
  uint64_t seen = 0;
  for (;;) {
    auto fresh = [&] { return slot->seq.load(std::memory_order_acquire) != seen; };
    Job job;
    if (!spin_until(fresh)) {
      std::unique_lock<std::mutex> lock(slot->mutex);
      slot->wake.wait(lock, [&] { return slot->stop || fresh(); });
      if (slot->stop) return;
    }
    {
      std::lock_guard<std::mutex> lock(slot->mutex);
      seen = slot->seq.load(std::memory_order_relaxed);
      job = slot->job;
    }
    copy_part(job, job.index);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(done_mutex_);
      done_.notify_one();
    }
  }
}

}  // namespace metrale::core::staging
