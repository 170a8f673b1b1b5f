// Strict numbers from environment variables. strtoull skips leading white
// space and accepts a minus sign (" -1" becomes 2^64-1), so a typo would turn
// into a huge red zone or device ordinal; here only plain decimal digits pass.
#pragma once

#include <cstdint>

namespace metrale::backend {

// The value of `value`: one or more ASCII digits, nothing else (no sign, no
// white space, no base prefix, no suffix), at most `max`. Anything else
// throws INVALID_ARGUMENT naming `var` and the value as given.
uint64_t parse_env_number(const char* var, const char* value, uint64_t max);

}  // namespace metrale::backend
