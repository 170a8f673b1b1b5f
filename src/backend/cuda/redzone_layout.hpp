// What the red-zone kernels (redzone_kernels.cu) and their host side
// (cuda_redzone.cpp, cuda_redzone_table.cpp, cuda_pad_check.cpp) agree on:
// the layouts of the structs they pass, and the launch shape.
#pragma once

#include <cstddef>
#include <cstdint>

#include "backend/backend.hpp"

namespace metrale::backend::cuda_impl {

struct DeviceRange {  // RedzoneRange
  uint64_t ptr;
  uint64_t bytes;
};
struct DevicePatch {  // RedzonePatch
  uint64_t slot;
  uint64_t ptr;
  uint64_t bytes;
};
struct DeviceHit {  // RedzoneHit
  uint32_t slot;
  uint32_t bad_bytes;
};
static_assert(sizeof(DeviceRange) == 16 && sizeof(DevicePatch) == 24 && sizeof(DeviceHit) == 8,
              "layouts of redzone_kernels.cu");
static_assert(sizeof(Backend::PadCheck) == 16, "RedzoneCheck of redzone_kernels.cu is 16 bytes");

// A multiple of 32: the list and check kernels give each range one warp.
constexpr unsigned kThreadsPerBlock = 256;
// The kernels loop over ranges, so the grid need not grow past this.
constexpr size_t kMaxBlocks = 65535;

}  // namespace metrale::backend::cuda_impl
