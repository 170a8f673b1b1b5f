// Device code for the red-zone pass: fill or check many small ranges in one
// launch. Built by nvcc into a fatbin that the library embeds as bytes
// (embed_fatbin.py) and loads with cuModuleLoadData on first use.
//
// Layout shared with cuda_redzone.cpp: RedzoneRange is two 64-bit words.

struct RedzoneRange {
  unsigned long long ptr;
  unsigned long long bytes;
};

// Blocks take ranges in turn (one block per range while the grid is as large
// as the range count); a block's threads stride over the range's bytes.
extern "C" __global__ void metrale_redzone_fill(const RedzoneRange* ranges,
                                                unsigned long long n, unsigned int byte) {
  for (unsigned long long r = blockIdx.x; r < n; r += gridDim.x) {
    unsigned char* p = reinterpret_cast<unsigned char*>(ranges[r].ptr);
    const unsigned long long bytes = ranges[r].bytes;
    for (unsigned long long i = threadIdx.x; i < bytes; i += blockDim.x)
      p[i] = static_cast<unsigned char>(byte);
  }
}

// counts[r] = bytes of range r that differ from `byte` (saturated at 2^32-1).
extern "C" __global__ void metrale_redzone_count(const RedzoneRange* ranges,
                                                 unsigned long long n, unsigned int byte,
                                                 unsigned int* counts) {
  __shared__ unsigned long long block_total;
  for (unsigned long long r = blockIdx.x; r < n; r += gridDim.x) {
    if (threadIdx.x == 0) block_total = 0;
    __syncthreads();
    const unsigned char* p = reinterpret_cast<const unsigned char*>(ranges[r].ptr);
    const unsigned long long bytes = ranges[r].bytes;
    unsigned long long mine = 0;
    for (unsigned long long i = threadIdx.x; i < bytes; i += blockDim.x)
      mine += p[i] != static_cast<unsigned char>(byte);
    if (mine != 0) atomicAdd(&block_total, mine);
    __syncthreads();
    if (threadIdx.x == 0)
      counts[r] = block_total > 0xffffffffull ? 0xffffffffu
                                              : static_cast<unsigned int>(block_total);
    // block_total is reset by the next range only after thread 0 read it.
    __syncthreads();
  }
}
