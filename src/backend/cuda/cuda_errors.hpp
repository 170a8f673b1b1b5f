// CUresult -> metrale status and message. Every failing driver call becomes
// "<cuFunction> failed: <CUDA_ERROR_NAME> (<code>): <description>" with the
// raw code kept in Error::driver_code().
#pragma once

#include <cuda.h>

#include <string>

#include "backend/error.hpp"

namespace metrale::backend::cuda_impl {

struct DriverApi;

// The status the ABI documents for a driver code.
metrale_status_t status_for(CUresult rc);
// Faults after which the context is unusable (an illegal address, a trap...).
bool is_sticky(CUresult rc);
// Whether a failed call's code could be a sticky fault this library does not
// know (a code newer than cuda.h): worth a probe. False for success, for the
// sticky codes (already CONTEXT_LOST) and for every known non-sticky code
// (INVALID_VALUE, INVALID_HANDLE, LAUNCH_OUT_OF_RESOURCES, NOT_FOUND, ...).
bool may_hide_fault(CUresult rc);
// Codes a free/destroy gets when the context is already gone (at process
// exit, after a reset): nothing is left to free, so they are not errors.
bool is_teardown_noop(CUresult rc);
// "CUDA_ERROR_NAME (code): description". api may be null (no driver yet).
std::string describe(const DriverApi* api, CUresult rc);
// The whole message for a failed call to `function`, with `detail` appended.
std::string failure_message(const DriverApi* api, const char* function, CUresult rc,
                            const std::string& detail = std::string());
[[noreturn]] void throw_failure(const DriverApi* api, const char* function, CUresult rc,
                                const std::string& detail = std::string());

}  // namespace metrale::backend::cuda_impl
