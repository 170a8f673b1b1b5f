// The objects behind metrale_stream_t, metrale_event_t and metrale_graph_t.
// The context owns them until it is destroyed; a destroyed handle stays
// readable (alive == false) so using it is an error, not a crash.
#pragma once

#include <atomic>
#include <deque>
#include <memory>
#include <mutex>
#include <vector>

#include "backend/backend.hpp"

struct metrale_context;

struct metrale_stream {
  metrale_context* owner = nullptr;
  std::atomic<bool> alive{false};
  metrale::backend::StreamHandle handle = 0;
  bool is_default = false;
};

struct metrale_event {
  metrale_context* owner = nullptr;
  std::atomic<bool> alive{false};
  metrale::backend::EventHandle handle = 0;
  bool timing = true;
  std::atomic<bool> recorded{false};
};

struct metrale_graph {
  metrale_context* owner = nullptr;
  std::atomic<bool> alive{false};
  metrale::backend::GraphHandle handle = 0;
};

namespace metrale::core {

// Owns every object of one kind; dead objects are reused through a free list.
template <class T>
class HandlePool {
 public:
  T* acquire() {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!free_.empty()) {
      T* t = free_.back();
      free_.pop_back();
      return t;
    }
    all_.push_back(std::make_unique<T>());
    return all_.back().get();
  }
  void release(T* t) {
    std::lock_guard<std::mutex> lock(mutex_);
    free_.push_back(t);
  }
  std::vector<T*> alive() const {
    std::lock_guard<std::mutex> lock(mutex_);
    std::vector<T*> out;
    for (const auto& t : all_) {
      if (t->alive.load()) out.push_back(t.get());
    }
    return out;
  }

 private:
  mutable std::mutex mutex_;
  std::deque<std::unique_ptr<T>> all_;
  std::vector<T*> free_;
};

}  // namespace metrale::core
