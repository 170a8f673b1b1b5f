#include "core/param_layout.hpp"

#include <string>

#include "backend/error.hpp"

namespace metrale::core {

namespace {

bool power_of_two(size_t v) { return v != 0 && (v & (v - 1)) == 0; }

std::string param(size_t i) { return "parameter " + std::to_string(i); }

void check_size(size_t i, size_t size) {
  if (size == 0 || size > kMaxParamBytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, param(i) + " has size " + std::to_string(size) +
                                             " (must be 1.." + std::to_string(kMaxParamBytes) +
                                             ")");
  }
}

}  // namespace

void check_param_count(size_t n) {
  if (n > kMaxParams) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "nparams is " + std::to_string(n) + ", more than " +
                                             std::to_string(kMaxParams) +
                                             " (a kernel takes at most that many bytes of "
                                             "parameters)");
  }
}

size_t inferred_alignment(size_t size) {
  const size_t align = size & (~size + 1);  // lowest set bit: largest power of two dividing size
  return align > 8 ? 8 : align;
}

std::vector<backend::ParamInfo> natural_layout(const size_t* sizes, const size_t* aligns, size_t n,
                                               size_t* args_bytes) {
  check_param_count(n);
  std::vector<backend::ParamInfo> layout;
  layout.reserve(n);
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    check_size(i, sizes[i]);
    const size_t align = aligns[i];
    // sizeof is always a multiple of alignof: a caller whose alignment does
    // not divide the size has swapped the arrays or mistyped one of them.
    if (!power_of_two(align) || sizes[i] % align != 0) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           param(i) + " has alignment " + std::to_string(align) + " for size " +
               std::to_string(sizes[i]) +
               " (must be a power of two dividing the size, as alignof is)");
    }
    // offset <= i * 2 * kMaxParamBytes: no wrap for any n an array can hold.
    offset = (offset + align - 1) & ~(align - 1);
    layout.push_back(backend::ParamInfo{offset, sizes[i]});
    offset += sizes[i];
  }
  *args_bytes = offset;
  return layout;
}

void check_caller_layout(const size_t* offsets, const size_t* sizes, size_t n, size_t args_bytes) {
  check_param_count(n);
  size_t end = 0;  // of the parameter before
  for (size_t i = 0; i < n; ++i) {
    check_size(i, sizes[i]);
    if (offsets[i] < end) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           param(i) + " is at offset " + std::to_string(offsets[i]) +
               ", inside the parameter before it (which ends at " + std::to_string(end) + ")");
    }
    if (offsets[i] > args_bytes || sizes[i] > args_bytes - offsets[i]) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           param(i) + " (offset " + std::to_string(offsets[i]) + ", " + std::to_string(sizes[i]) +
               " bytes) ends past args_bytes " + std::to_string(args_bytes));
    }
    end = offsets[i] + sizes[i];
  }
  if (end != args_bytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "the parameters end at " + std::to_string(end) + " but args_bytes is " +
             std::to_string(args_bytes) + " (nothing follows the last parameter)");
  }
}

void check_matches_kernel(const char* kernel, const std::vector<backend::ParamInfo>& expected,
                          const size_t* offsets, const size_t* sizes, size_t n) {
  if (n != expected.size()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("kernel ") + kernel + " takes " + std::to_string(expected.size()) +
             " parameters, the caller's layout has " + std::to_string(n));
  }
  for (size_t i = 0; i < n; ++i) {
    if (expected[i].offset != offsets[i] || expected[i].size != sizes[i]) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           std::string("kernel ") + kernel + " " + param(i) + ": the kernel expects offset " +
               std::to_string(expected[i].offset) + " (" + std::to_string(expected[i].size) +
               " bytes), the caller gave offset " + std::to_string(offsets[i]) + " (" +
               std::to_string(sizes[i]) + " bytes); pack each parameter at its natural "
               "alignment (see metrale_param_layout)");
    }
  }
}

}  // namespace metrale::core
