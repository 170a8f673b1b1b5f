// The red-zone scan's pad table kept on the device between scans
// (pattern_count_table): a scan uploads only the slots that changed since
// the last one (a patch kernel writes them), zeroes one counter, launches one
// count kernel that lists the bad ranges, and reads back a small block (the
// counter and the first hits). Today's alternative, uploading every range
// and reading back a count per range, moved 20 bytes per pad per scan.
// Everything here runs under redzone_mutex_ on the red-zone stream.
#include <algorithm>
#include <cstring>

#include "backend/cuda/cuda_backend.hpp"
#include "backend/cuda/redzone_layout.hpp"

namespace metrale::backend::cuda_impl {
namespace {

// table_results_: the found counter, padded to 16 bytes, then the hits.
constexpr size_t kHitsOffset = 16;
// Hits read back with the counter in the first (and usually only) copy.
constexpr size_t kFirstHits = 256;
constexpr size_t kReadBackBytes = kHitsOffset + kFirstHits * sizeof(DeviceHit);

}  // namespace

bool CudaBackend::table_reserve(size_t n) {
  if (table_ != 0 && table_results_ != 0 && n <= table_capacity_) return false;
  const size_t capacity = std::max<size_t>({n, 2 * table_capacity_, 1024});
  if (table_ != 0) api_.memFree(table_);
  if (table_results_ != 0) api_.memFree(table_results_);
  table_ = table_results_ = 0;
  table_capacity_ = 0;
  check(api_.memAlloc(&table_, capacity * sizeof(DeviceRange)), "cuMemAlloc_v2",
        "the red-zone pad table");
  check(api_.memAlloc(&table_results_, kHitsOffset + capacity * sizeof(DeviceHit)),
        "cuMemAlloc_v2", "the red-zone scan's results");
  table_capacity_ = capacity;
  return true;
}

// Only while the red-zone stream has nothing pending that reads or writes
// the staging buffer: a reallocation frees it.
void CudaBackend::table_staging_reserve(size_t bytes) {
  if (bytes <= table_staging_bytes_) return;
  const size_t want = std::max<size_t>({bytes, 2 * table_staging_bytes_, 4096});
  if (table_staging_ != nullptr) api_.memFreeHost(table_staging_);
  table_staging_ = nullptr;
  table_staging_bytes_ = 0;
  void* staging = nullptr;
  check(api_.memHostAlloc(&staging, want, 0), "cuMemHostAlloc",
        "staging for the red-zone pad table");
  table_staging_ = static_cast<unsigned char*>(staging);
  table_staging_bytes_ = want;
}

void CudaBackend::table_update(const Range* table, size_t n, const uint32_t* changed,
                               size_t nchanged, bool whole) {
  // A changed slot past the table would be a write past the device buffer:
  // never sent as a patch.
  for (size_t i = 0; !whole && i < nchanged; ++i) whole = changed[i] >= n;
  // Past a quarter of the table, patches (24 bytes each plus a launch) cost
  // more than the plain upload (16 bytes a range).
  if (!whole && nchanged > n / 4) whole = true;
  const size_t upload = whole ? n * sizeof(DeviceRange) : nchanged * sizeof(DevicePatch);
  // Reserved for the read back as well, before anything is enqueued.
  table_staging_reserve(std::max(upload, kReadBackBytes));
  if (whole) {
    auto* staged = reinterpret_cast<DeviceRange*>(table_staging_);
    for (size_t i = 0; i < n; ++i) staged[i] = DeviceRange{table[i].ptr, table[i].bytes};
    check(api_.memcpyHtoDAsync(table_, staged, upload, redzone_stream_), "cuMemcpyHtoDAsync_v2",
          "the red-zone pad table");
    return;
  }
  if (nchanged == 0) return;
  if (nchanged > table_patches_capacity_) {
    const size_t capacity = std::max<size_t>({nchanged, 2 * table_patches_capacity_, 256});
    if (table_patches_ != 0) api_.memFree(table_patches_);
    table_patches_ = 0;
    table_patches_capacity_ = 0;
    check(api_.memAlloc(&table_patches_, capacity * sizeof(DevicePatch)), "cuMemAlloc_v2",
          "red-zone pad table patches");
    table_patches_capacity_ = capacity;
  }
  auto* staged = reinterpret_cast<DevicePatch*>(table_staging_);
  for (size_t i = 0; i < nchanged; ++i) {
    const Range& r = table[changed[i]];
    staged[i] = DevicePatch{changed[i], r.ptr, r.bytes};
  }
  check(api_.memcpyHtoDAsync(table_patches_, staged, upload, redzone_stream_),
        "cuMemcpyHtoDAsync_v2", "red-zone pad table patches");
  CUdeviceptr device_table = table_;
  CUdeviceptr device_patches = table_patches_;
  unsigned long long count = nchanged;
  void* params[] = {&device_table, &device_patches, &count};
  const auto blocks = static_cast<unsigned int>(
      std::min((nchanged + kThreadsPerBlock - 1) / kThreadsPerBlock, kMaxBlocks));
  check(api_.launchKernel(redzone_patch_, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0,
                          redzone_stream_, params, nullptr),
        "cuLaunchKernel", "metrale_redzone_patch");
}

void CudaBackend::table_count(size_t n, uint8_t byte, std::vector<PadHit>* hits) {
  check(api_.memsetD8Async(table_results_, 0, sizeof(uint32_t), redzone_stream_),
        "cuMemsetD8Async", "red-zone scan counter");
  CUdeviceptr device_table = table_;
  unsigned long long count = n;
  unsigned int value = byte;
  CUdeviceptr device_found = table_results_;
  CUdeviceptr device_hits = table_results_ + kHitsOffset;
  void* params[] = {&device_table, &count, &value, &device_found, &device_hits};
  const size_t warps_per_block = kThreadsPerBlock / 32;
  const auto blocks = static_cast<unsigned int>(
      std::min((n + warps_per_block - 1) / warps_per_block, kMaxBlocks));
  check(api_.launchKernel(redzone_count_list_, blocks, 1, 1, kThreadsPerBlock, 1, 1, 0,
                          redzone_stream_, params, nullptr),
        "cuLaunchKernel", "metrale_redzone_count_list");
  const size_t first = std::min(n, kFirstHits);
  check(api_.memcpyDtoHAsync(table_staging_, table_results_,
                             kHitsOffset + first * sizeof(DeviceHit), redzone_stream_),
        "cuMemcpyDtoHAsync_v2", "red-zone scan results");
  check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone scan");
  uint32_t found = 0;
  std::memcpy(&found, table_staging_, sizeof found);
  const size_t total = std::min<size_t>(found, n);
  const unsigned char* at = table_staging_ + kHitsOffset;
  if (total > first) {
    // Many bad pads: read them all (the stream is idle, staging may grow).
    table_staging_reserve(total * sizeof(DeviceHit));
    check(api_.memcpyDtoHAsync(table_staging_, table_results_ + kHitsOffset,
                               total * sizeof(DeviceHit), redzone_stream_),
          "cuMemcpyDtoHAsync_v2", "red-zone scan results");
    check(api_.streamSynchronize(redzone_stream_), "cuStreamSynchronize", "red-zone scan");
    at = table_staging_;
  }
  hits->reserve(hits->size() + total);
  for (size_t i = 0; i < total; ++i) {
    DeviceHit h;
    std::memcpy(&h, at + i * sizeof h, sizeof h);
    hits->push_back(PadHit{h.slot, h.bad_bytes});
  }
}

void CudaBackend::table_release() noexcept {
  if (table_ != 0) api_.memFree(table_);
  if (table_results_ != 0) api_.memFree(table_results_);
  if (table_patches_ != 0) api_.memFree(table_patches_);
  if (table_staging_ != nullptr) api_.memFreeHost(table_staging_);
  table_ = table_results_ = table_patches_ = 0;
  table_capacity_ = table_patches_capacity_ = 0;
  table_staging_ = nullptr;
  table_staging_bytes_ = 0;
  table_valid_ = false;
}

}  // namespace metrale::backend::cuda_impl
