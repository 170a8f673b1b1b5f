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

// The persistent pad table (cuda_redzone_table.cpp): patches write changed
// slots into the table; the count kernel lists only the ranges that differ.
struct RedzonePatch {
  unsigned long long slot;
  unsigned long long ptr;
  unsigned long long bytes;
};

struct RedzoneHit {
  unsigned int slot;
  unsigned int bad_bytes;
};

extern "C" __global__ void metrale_redzone_patch(RedzoneRange* table,
                                                 const RedzonePatch* patches,
                                                 unsigned long long n) {
  const unsigned long long stride = static_cast<unsigned long long>(gridDim.x) * blockDim.x;
  for (unsigned long long i = static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x;
       i < n; i += stride) {
    table[patches[i].slot].ptr = patches[i].ptr;
    table[patches[i].slot].bytes = patches[i].bytes;
  }
}

// One warp per range (pads are small: a block per range left most threads
// idle and paid three barriers a range). Every lane of a warp works on the
// same range, so the shuffles see the whole warp. A range with a bad byte
// takes the next place in hits (*found counts them; the host zeroes it
// before the launch); hits has room for n entries, one per range at most.
extern "C" __global__ void metrale_redzone_count_list(const RedzoneRange* ranges,
                                                      unsigned long long n, unsigned int byte,
                                                      unsigned int* found, RedzoneHit* hits) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned long long warps =
      (static_cast<unsigned long long>(gridDim.x) * blockDim.x) >> 5;
  for (unsigned long long r =
           (static_cast<unsigned long long>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
       r < n; r += warps) {
    const unsigned char* p = reinterpret_cast<const unsigned char*>(ranges[r].ptr);
    const unsigned long long bytes = ranges[r].bytes;
    unsigned long long mine = 0;
    for (unsigned long long i = lane; i < bytes; i += 32)
      mine += p[i] != static_cast<unsigned char>(byte);
    for (int offset = 16; offset > 0; offset >>= 1)
      mine += __shfl_down_sync(0xffffffffu, mine, offset);
    if (lane == 0 && mine != 0) {
      const unsigned int at = atomicAdd(found, 1u);
      if (at < n) {
        hits[at].slot = static_cast<unsigned int>(r);
        hits[at].bad_bytes = mine > 0xffffffffull ? 0xffffffffu : static_cast<unsigned int>(mine);
      }
    }
  }
}

// Matches Backend::PadCheck (cuda_pad_check.cpp).
struct RedzoneCheck {
  unsigned long long first_bad;
  unsigned int bad_bytes;
  unsigned int found;
};

// The check of freed pool blocks, in the order of the stream they were freed
// on: one warp per range counts the bytes other than `byte`, notes the first
// of them (offset and value), then writes `byte` back over the range, so the
// block's next owner finds its pad intact. results[r] is written for every
// range. The value is read before the warp restores the range (__syncwarp).
extern "C" __global__ void metrale_redzone_check_restore(const RedzoneRange* ranges,
                                                         unsigned long long n, unsigned int byte,
                                                         RedzoneCheck* results) {
  const unsigned int lane = threadIdx.x & 31u;
  const unsigned long long warps =
      static_cast<unsigned long long>(gridDim.x) * (blockDim.x / 32u);
  const unsigned char want = static_cast<unsigned char>(byte);
  for (unsigned long long r =
           static_cast<unsigned long long>(blockIdx.x) * (blockDim.x / 32u) + threadIdx.x / 32u;
       r < n; r += warps) {
    unsigned char* p = reinterpret_cast<unsigned char*>(ranges[r].ptr);
    const unsigned long long bytes = ranges[r].bytes;
    unsigned long long bad = 0, first = ~0ull;
    for (unsigned long long i = lane; i < bytes; i += 32u) {
      if (p[i] == want) continue;
      ++bad;
      if (first == ~0ull) first = i;  // a lane's offsets only grow
    }
    for (int off = 16; off > 0; off >>= 1) {
      bad += __shfl_xor_sync(0xffffffffu, bad, off);
      const unsigned long long other = __shfl_xor_sync(0xffffffffu, first, off);
      first = other < first ? other : first;
    }
    if (lane == 0) {
      results[r].bad_bytes = bad > 0xffffffffull ? 0xffffffffu : static_cast<unsigned int>(bad);
      results[r].first_bad = bad != 0 ? first : 0;
      results[r].found = bad != 0 ? p[first] : byte;
    }
    __syncwarp();
    if (bad == 0) continue;
    for (unsigned long long i = lane; i < bytes; i += 32u) p[i] = want;
  }
}
