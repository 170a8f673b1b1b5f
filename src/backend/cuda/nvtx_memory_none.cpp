// NvtxMemory for a build without the NVTX3 headers (nvtx3/ was not found
// next to cuda.h; meson said so at configure time): annotations stay off.
#include "backend/cuda/nvtx_memory.hpp"

namespace metrale::backend::cuda_impl {

bool NvtxMemory::begin(bool) { return false; }
const NvtxMemory::Heap* NvtxMemory::heap_of(uint64_t) const { return nullptr; }
void NvtxMemory::chunk(uint64_t, size_t) noexcept {}
void NvtxMemory::chunk_release(uint64_t) noexcept {}
void NvtxMemory::block(uint64_t, size_t) noexcept {}
void NvtxMemory::block_release(uint64_t) noexcept {}

}  // namespace metrale::backend::cuda_impl
