// Context options resolved in order: defaults < the caller's struct < env vars.
#pragma once

#include "metrale_gpu.h"

namespace metrale::core {

constexpr size_t kDefaultTraceCapacity = 65536;

void default_options(metrale_context_options_t* opts);
// struct_size of the 0.1 layout (everything before `pool`), still accepted.
size_t options_v1_size();
// Writes only the first struct_size bytes (a known layout size, else
// INVALID_ARGUMENT).
void default_options_sized(metrale_context_options_t* opts, size_t struct_size);
// Validates opts (may be NULL) and applies the METRALE_* variables; throws
// INVALID_ARGUMENT naming the bad field or variable and its value.
metrale_context_options_t resolve_options(const metrale_context_options_t* opts);

}  // namespace metrale::core
