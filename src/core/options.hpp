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
// b with METRALE_BACKEND applied (it overrides opts.backend at create);
// INVALID_ARGUMENT when the variable is malformed.
metrale_backend_t backend_from_env(metrale_backend_t b);
// How many devices the backend metrale_context_create would pick for raw
// (an int: the caller's value, checked before it is used as the enum)
// offers: cuda's count, host's METRALE_HOST_DEVICES, or for AUTO cuda's when
// its driver answers with a device, else host's. INVALID_ARGUMENT for a
// value outside metrale_backend_t.
int device_count(int raw);

}  // namespace metrale::core
