#include "core/log.hpp"

#include "backend/log_sink.hpp"

#include <spdlog/details/null_mutex.h>
#include <spdlog/sinks/base_sink.h>

#include <cstdio>
#include <cstdlib>
#include <memory>
#include <mutex>

#include "backend/error.hpp"
#include "core/log_callback.hpp"

namespace metrale::core {
namespace {

metrale_log_level_t from_spdlog(spdlog::level::level_enum l) {
  switch (l) {
    case spdlog::level::trace: return METRALE_LOG_TRACE;
    case spdlog::level::debug: return METRALE_LOG_DEBUG;
    case spdlog::level::info: return METRALE_LOG_INFO;
    case spdlog::level::warn: return METRALE_LOG_WARN;
    case spdlog::level::err: return METRALE_LOG_ERROR;
    case spdlog::level::critical: return METRALE_LOG_CRITICAL;
    default: return METRALE_LOG_OFF;
  }
}

spdlog::level::level_enum to_spdlog(metrale_log_level_t l) {
  switch (l) {
    case METRALE_LOG_TRACE: return spdlog::level::trace;
    case METRALE_LOG_DEBUG: return spdlog::level::debug;
    case METRALE_LOG_INFO: return spdlog::level::info;
    case METRALE_LOG_WARN: return spdlog::level::warn;
    case METRALE_LOG_ERROR: return spdlog::level::err;
    case METRALE_LOG_CRITICAL: return spdlog::level::critical;
    default: return spdlog::level::off;
  }
}

// Forwards each formatted line to the user's callback, or to stderr. The
// sink takes no lock of its own (null_mutex): base_sink<std::mutex> would hold
// its mutex across the callback, so a callback that logs through the library
// would lock it again on the same thread. The gate decides who gets the line.
class ForwardingSink : public spdlog::sinks::base_sink<spdlog::details::null_mutex> {
 public:
  LogCallbackGate& gate() { return gate_; }

 protected:
  void sink_it_(const spdlog::details::log_msg& msg) override {
    std::string text = "metrale: ";
    text.append(msg.payload.data(), msg.payload.size());
    if (gate_.deliver(from_spdlog(msg.level), text.c_str())) return;
    text.push_back('\n');
    std::fwrite(text.data(), 1, text.size(), stderr);
  }
  void flush_() override { std::fflush(stderr); }

 private:
  LogCallbackGate gate_;
};

void log_from_backend(metrale_log_level_t level, const std::string& text);

struct LoggerHolder {
  std::shared_ptr<ForwardingSink> sink = std::make_shared<ForwardingSink>();
  std::shared_ptr<spdlog::logger> logger = std::make_shared<spdlog::logger>("metrale", sink);

  LoggerHolder() {
    logger->set_level(spdlog::level::warn);
    const char* env = std::getenv("METRALE_LOG");
    metrale_log_level_t level;
    // A malformed value at load time is ignored; context creation reports it.
    if (env != nullptr && parse_log_level(env, &level)) logger->set_level(to_spdlog(level));
    backend::set_log_sink(&log_from_backend);
  }
};

LoggerHolder& holder() {
  static LoggerHolder h;
  return h;
}

void log_from_backend(metrale_log_level_t level, const std::string& text) {
  holder().logger->log(to_spdlog(level), "{}", text);
}

// Reads METRALE_LOG when the library is loaded, not at the first log line.
const bool loaded_at_start = (holder(), true);

}  // namespace

spdlog::logger& log() { return *holder().logger; }

bool parse_log_level(const std::string& text, metrale_log_level_t* out) {
  static const struct {
    const char* name;
    metrale_log_level_t level;
  } names[] = {{"trace", METRALE_LOG_TRACE}, {"debug", METRALE_LOG_DEBUG},
               {"info", METRALE_LOG_INFO},   {"warn", METRALE_LOG_WARN},
               {"warning", METRALE_LOG_WARN}, {"error", METRALE_LOG_ERROR},
               {"critical", METRALE_LOG_CRITICAL}, {"off", METRALE_LOG_OFF}};
  for (const auto& n : names) {
    if (text == n.name) {
      *out = n.level;
      return true;
    }
  }
  return false;
}

void set_log_level(metrale_log_level_t level) { holder().logger->set_level(to_spdlog(level)); }

void apply_log_env() {
  (void)loaded_at_start;
  const char* env = std::getenv("METRALE_LOG");
  if (env == nullptr || *env == '\0') return;
  metrale_log_level_t level;
  if (!parse_log_level(env, &level)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("METRALE_LOG='") + env +
             "' is not a log level (trace, debug, info, warn, error, critical, off)");
  }
  set_log_level(level);
}

void set_log_callback(metrale_log_fn fn, void* user) { holder().sink->gate().set(fn, user); }

bool in_log_callback() { return LogCallbackGate::inside_callback(); }

}  // namespace metrale::core
