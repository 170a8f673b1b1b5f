// CopyWorkers: the caller wakes the workers a copy needs through their own
// mailboxes; they and the caller claim its parts one at a time from one
// counter, and the caller waits until every part is copied. Between
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

void CopyWorkers::copy_part(const Job& job, uint32_t index) {
  const size_t first = job.part * index;
  if (first >= job.bytes) return;
  const size_t n = job.bytes - first < job.part ? job.bytes - first : job.part;
  copy_bytes(job.mode, job.dst + first, job.src + first, n);
}

bool CopyWorkers::claim(const Job& job, uint32_t* part) {
  uint64_t v = claim_.load(std::memory_order_acquire);
  for (;;) {
    if (static_cast<uint32_t>(v >> 32) != job.gen || static_cast<uint32_t>(v) >= job.parts)
      return false;
    if (claim_.compare_exchange_weak(v, v + 1, std::memory_order_acq_rel,
                                     std::memory_order_acquire)) {
      *part = static_cast<uint32_t>(v);
      return true;
    }
  }
}

void CopyWorkers::copy_claimed(const Job& job) {
  uint32_t part = 0;
  while (claim(job, &part)) {
    copy_part(job, part);
    if (remaining_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
      std::lock_guard<std::mutex> lock(done_mutex_);
      done_.notify_one();
    }
  }
}

void CopyWorkers::copy(void* dst, const void* src, size_t bytes, StoreMode mode) {
  Run run(*this);
  run.start(dst, src, bytes, mode);
  run.finish();
}

void CopyWorkers::Run::start(void* dst, const void* src, size_t bytes, StoreMode mode) {
  finish();  // one copy at a time
  if (bytes == 0) return;
  CopyWorkers& w = w_;
  size_t helpers = bytes / kMinPart;  // threads worth waking, the caller included
  if (helpers > w.threads_) helpers = w.threads_;
  helpers = helpers > 1 ? helpers - 1 : 0;
  if (helpers > 0) w.start_locked();
  if (helpers > w.pool_.size()) helpers = w.pool_.size();
  size_t parts = 1;
  if (helpers > 0) {
    parts = 2 * (helpers + 1);
    if (parts > bytes / kMinClaim) parts = bytes / kMinClaim;
  }
  // Parts are whole pages (but the last) so that no two threads write the
  // same cache line or page; rounding may leave fewer parts.
  constexpr size_t kPage = 4096;
  size_t part = (bytes + parts - 1) / parts;
  if (parts > 1) part = (part + kPage - 1) & ~(kPage - 1);
  parts = (bytes + part - 1) / part;
  Job& job = w.job_;
  job = Job{static_cast<unsigned char*>(dst), static_cast<const unsigned char*>(src), bytes, part,
            static_cast<uint32_t>(parts), job.gen + 1, mode};
  // remaining_ before the claims open: a claim (acquire) sees it.
  w.remaining_.store(static_cast<uint32_t>(parts), std::memory_order_relaxed);
  w.claim_.store(uint64_t{job.gen} << 32, std::memory_order_release);
  started_ = true;
  for (size_t i = 0; i < helpers; ++i) {
    Slot& slot = *w.slots_[i];
    {
      std::lock_guard<std::mutex> lock(slot.mutex);
      slot.job = job;
      slot.seq.fetch_add(1, std::memory_order_release);
    }
    slot.wake.notify_one();
  }
}

void CopyWorkers::Run::finish() noexcept {
  if (!started_) return;
  started_ = false;
  CopyWorkers& w = w_;
  w.copy_claimed(w.job_);
  auto finished = [&] { return w.remaining_.load(std::memory_order_acquire) == 0; };
  if (!spin_until(finished)) {
    std::unique_lock<std::mutex> lock(w.done_mutex_);
    w.done_.wait(lock, finished);
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
#ifdef METRALE_TEST_SEAMS
    if (auto* seam = test_before_claim.load()) seam(job.gen);
#endif
    // A copy already finished (this worker woke late) has nothing left to
    // claim: its generation is gone.
    copy_claimed(job);
  }
}

}  // namespace metrale::core::staging
