// The one kernel-parameter packing rule (include/metrale_gpu.h, "Kernel
// parameter layout"): each parameter at the next multiple of its natural C
// alignment, in order, nothing after the last. Host registration lays host
// kernels out with it, metrale_param_layout exposes it, and a caller's
// layout is checked against a kernel's here.
#pragma once

#include <cstddef>
#include <vector>

#include "backend/backend.hpp"

namespace metrale::core {

// A parameter's size is 1..kMaxParamBytes (CUDA's classic limit on a
// kernel's parameters as a whole bounds any one of them).
constexpr size_t kMaxParamBytes = 4096;
// At most this many parameters: the most bytes of parameters any CUDA kernel
// takes (32764 since CUDA 12.1), each parameter at least one byte.
constexpr size_t kMaxParams = 32764;

// INVALID_ARGUMENT naming nparams when n is above kMaxParams: checked before
// anything is sized by n.
void check_param_count(size_t n);

// The alignment the sizes-only registration (metrale_module_register_host_params)
// assumes: the largest power of two dividing the size, at most 8. Right for
// scalars and pointers; an array or struct may be less aligned than that.
size_t inferred_alignment(size_t size);

// Lays out n parameters by the rule. INVALID_ARGUMENT as check_param_count,
// and, naming the parameter, for a size outside 1..kMaxParamBytes or an
// alignment that is not a power of two dividing the size.
// *args_bytes gets the end of the last parameter (0 when n is 0).
std::vector<backend::ParamInfo> natural_layout(const size_t* sizes, const size_t* aligns, size_t n,
                                               size_t* args_bytes);

// A caller's own layout (offsets and sizes of what it packed) must hold
// together: sizes 1..kMaxParamBytes, each parameter starting at or after the
// end of the one before, the last ending exactly at args_bytes, n within
// check_param_count. INVALID_ARGUMENT otherwise, naming the parameter.
void check_caller_layout(const size_t* offsets, const size_t* sizes, size_t n, size_t args_bytes);

// The caller's layout must equal the kernel's: same count, then per
// parameter the same offset and size. INVALID_ARGUMENT naming the kernel,
// the first parameter that differs, the kernel's offset and size and the
// caller's.
void check_matches_kernel(const char* kernel, const std::vector<backend::ParamInfo>& expected,
                          const size_t* offsets, const size_t* sizes, size_t n);

}  // namespace metrale::core
