#include "core/kernel_timer.hpp"

namespace metrale::core {

size_t KernelTimer::row_for(const void* kernel, const char* name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = row_of_.find(kernel);
  if (it != row_of_.end()) return it->second;
  if (rows_.size() >= kMaxKernels) return kNoRow;
  rows_.push_back(metrale_kernel_timing_t{name, 0, 0.0});
  row_of_.emplace(kernel, rows_.size() - 1);
  return rows_.size() - 1;
}

bool KernelTimer::reserve(backend::Backend& b) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queued_ + reserved_ < kMaxPending) {
      ++reserved_;
      return true;
    }
  }
  // Full: make room from what already finished, unless a resolver is busy.
  {
    std::unique_lock<std::mutex> resolving(resolve_mutex_, std::try_to_lock);
    if (!resolving.owns_lock()) return false;
    try {
      resolve_locked(b, false, 0);
    } catch (...) {
      // Not the launch's business: a lost context shows at the launch.
    }
  }
  std::lock_guard<std::mutex> lock(mutex_);
  if (queued_ + reserved_ >= kMaxPending) return false;
  ++reserved_;
  return true;
}

void KernelTimer::unreserve() {
  std::lock_guard<std::mutex> lock(mutex_);
  --reserved_;
}

KernelTimer::EventHandle KernelTimer::take_event(backend::Backend& b) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!idle_.empty()) {
      EventHandle e = idle_.back();
      idle_.pop_back();
      return e;
    }
  }
  return b.event_create(true);
}

void KernelTimer::give_back(backend::Backend& b, EventHandle e) noexcept {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (idle_.size() < kMaxIdleEvents) {
      idle_.push_back(e);
      return;
    }
  }
  try {
    b.event_destroy(e);
  } catch (...) {
    // An event we cannot destroy is one the driver no longer has.
  }
}

void KernelTimer::push(StreamHandle s, size_t row, EventHandle start, EventHandle end) {
  std::lock_guard<std::mutex> lock(mutex_);
  // The allocation first: a throw leaves the timer as it was (the caller
  // gives the events and the reservation back).
  queues_[s].push_back(Span{next_ticket_, row, start, end});
  ++next_ticket_;
  --reserved_;
  ++queued_;
}

void KernelTimer::resolve_all(backend::Backend& b) {
  uint64_t last;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = next_ticket_ - 1;
  }
  std::lock_guard<std::mutex> resolving(resolve_mutex_);
  resolve_locked(b, true, last);
}

void KernelTimer::resolve_locked(backend::Backend& b, bool wait, uint64_t last) {
  std::vector<StreamHandle> streams;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& q : queues_) streams.push_back(q.first);
  }
  for (StreamHandle s : streams) {
    for (;;) {
      Span span;
      {
        std::lock_guard<std::mutex> lock(mutex_);
        auto it = queues_.find(s);
        if (it == queues_.end() || it->second.empty()) break;
        span = it->second.front();
      }
      // Only this resolver pops, so `span` stays the front while we wait.
      if (wait) {
        if (span.ticket > last) break;
        b.event_synchronize(span.end);
      } else if (!b.event_query(span.end)) {
        break;
      }
      finish_front(b, s, b.event_elapsed_ms(span.start, span.end));
    }
  }
}

void KernelTimer::finish_front(backend::Backend& b, StreamHandle s, double ms) {
  EventHandle spare[2];
  size_t nspare = 0;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    auto it = queues_.find(s);
    const Span span = it->second.front();
    it->second.pop_front();
    if (it->second.empty()) queues_.erase(it);
    --queued_;
    rows_[span.row].launches += 1;
    rows_[span.row].total_ms += ms;
    for (EventHandle e : {span.start, span.end}) {
      if (idle_.size() < kMaxIdleEvents) {
        idle_.push_back(e);
      } else {
        spare[nspare++] = e;
      }
    }
  }
  for (size_t i = 0; i < nspare; ++i) {
    try {
      b.event_destroy(spare[i]);
    } catch (...) {
      // See give_back.
    }
  }
}

size_t KernelTimer::read(metrale_kernel_timing_t* out, size_t cap) const {
  // A row is made before its first launch is taken: one whose launches all
  // failed or lost their timing has nothing to say yet and is not listed.
  std::lock_guard<std::mutex> lock(mutex_);
  size_t n = 0;
  for (const metrale_kernel_timing_t& row : rows_) {
    if (row.launches == 0) continue;
    if (n < cap) out[n] = row;
    ++n;
  }
  return n;
}

void KernelTimer::release(backend::Backend& b) noexcept {
  std::vector<EventHandle> all;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    for (const auto& q : queues_) {
      for (const Span& span : q.second) {
        all.push_back(span.start);
        all.push_back(span.end);
      }
    }
    all.insert(all.end(), idle_.begin(), idle_.end());
    queues_.clear();
    idle_.clear();
    queued_ = 0;
  }
  for (EventHandle e : all) {
    try {
      b.event_destroy(e);
    } catch (...) {
      // Teardown: errors ignored.
    }
  }
}

size_t KernelTimer::pending() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return queued_ + reserved_;
}

size_t KernelTimer::idle_events() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return idle_.size();
}

}  // namespace metrale::core
