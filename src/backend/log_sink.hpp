// Where a backend sends a log line. Backends sit below core and cannot reach
// its logger, so core installs a sink when the library loads; until then (and
// if none is installed) lines are dropped.
#pragma once

#include <string>

#include "metrale_gpu.h"

namespace metrale::backend {

using LogSink = void (*)(metrale_log_level_t level, const std::string& text);

void set_log_sink(LogSink sink);
void log(metrale_log_level_t level, const std::string& text);

}  // namespace metrale::backend
