#include "backend/log_sink.hpp"

#include <atomic>

namespace metrale::backend {
namespace {
std::atomic<LogSink> installed{nullptr};
}

void set_log_sink(LogSink sink) { installed.store(sink, std::memory_order_release); }

void log(metrale_log_level_t level, const std::string& text) {
  if (LogSink sink = installed.load(std::memory_order_acquire)) sink(level, text);
}

}  // namespace metrale::backend
