// The library's own logger: one spdlog logger kept out of spdlog's global
// registry, so an application using spdlog itself never clashes with it.
#pragma once

#include <spdlog/spdlog.h>

#include <string>

#include "metrale_gpu.h"

namespace metrale::core {

spdlog::logger& log();

// Parses a METRALE_LOG value ("trace".."off"); false when it is none of them.
bool parse_log_level(const std::string& text, metrale_log_level_t* out);
void set_log_level(metrale_log_level_t level);
// Re-reads METRALE_LOG; a malformed value throws INVALID_ARGUMENT.
void apply_log_env();
// fn NULL restores stderr. Returns once no other thread runs the old
// callback; from inside the callback, INVALID_ARGUMENT (see log_callback.hpp).
void set_log_callback(metrale_log_fn fn, void* user);
// Whether this thread is running the user's log callback right now.
bool in_log_callback();

}  // namespace metrale::core
