// libmetrale_torch_probe: two CUDAPluggableAllocator pairs for
// bench/torch_training.py, which loads this module with ctypes and torch.
//
//   probe_floor_alloc / probe_floor_free   the floor of torch's pluggable
//     interface: common/floor_cache.hpp (bench_pool's cold part uses it
//     too) over cuMemAlloc, with no ledger, no tags and no streams. A training step on
//     it costs what torch's pluggable path costs with an allocator that does
//     almost nothing, so the library's figure reads against it.
//   probe_timed_alloc / probe_timed_free   forward to the pair given to
//     probe_set_target (the library's metrale_pluggable_alloc/free) and
//     time each call: the allocator's own CPU time inside a training step.
//
// Both pairs count calls and nanoseconds (probe_read). The floor never
// frees to the driver: it lives for one training process.
#include <dlfcn.h>
#include <sys/types.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <cstdio>

#include "floor_cache.hpp"

#define PROBE_API extern "C" __attribute__((visibility("default")))

namespace {

using AllocFn = void* (*)(ssize_t, int, void*);
using FreeFn = void (*)(void*, ssize_t, int, void*);

std::atomic<uint64_t> g_alloc_ns{0}, g_allocs{0}, g_free_ns{0}, g_frees{0};
std::atomic<AllocFn> g_target_alloc{nullptr};
std::atomic<FreeFn> g_target_free{nullptr};

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// The driver calls the floor needs, opened once.
struct Driver {
  int (*mem_alloc)(unsigned long long*, size_t) = nullptr;
  int (*ctx_get)(void**) = nullptr;
  int (*ctx_set)(void*) = nullptr;
  int (*primary_retain)(void**, int) = nullptr;
  bool ok = false;
  Driver() {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) return;
    mem_alloc = reinterpret_cast<decltype(mem_alloc)>(dlsym(h, "cuMemAlloc_v2"));
    ctx_get = reinterpret_cast<decltype(ctx_get)>(dlsym(h, "cuCtxGetCurrent"));
    ctx_set = reinterpret_cast<decltype(ctx_set)>(dlsym(h, "cuCtxSetCurrent"));
    primary_retain = reinterpret_cast<decltype(primary_retain)>(dlsym(h, "cuDevicePrimaryCtxRetain"));
    ok = mem_alloc && ctx_get && ctx_set && primary_retain;
  }
  // torch's threads (its autograd workers too) may have no current
  // context until the runtime makes one: bind the device's primary one.
  bool bind(int device) {
    void* c = nullptr;
    if (ctx_get(&c) == 0 && c != nullptr) return true;
    return primary_retain(&c, device) == 0 && ctx_set(c) == 0;
  }
};

// The device of the probe_floor_alloc call in progress on this thread.
thread_local int t_device = 0;

Driver& driver() {
  static Driver* d = new Driver;  // never destroyed: torch frees at exit
  return *d;
}

// The floor over cuMemAlloc on the calling thread's device. Never
// destroyed, and its blocks are never freed: torch frees at exit, and the
// process ends with the training.
auto& floor_cache() {
  static auto* f = new bench::FloorCache([](size_t bytes) -> void* {
    Driver& d = driver();
    unsigned long long dp = 0;
    int rc = -1;
    if (!d.ok) {
      std::fprintf(stderr, "torch_alloc_probe: libcuda.so.1 (or cuMemAlloc_v2, cuCtxGetCurrent, "
                           "cuCtxSetCurrent, cuDevicePrimaryCtxRetain in it) is not there\n");
      return nullptr;
    }
    if (d.bind(t_device)) rc = d.mem_alloc(&dp, bytes);
    if (rc != 0) {
      std::fprintf(stderr, "torch_alloc_probe: cuMemAlloc of %zu bytes failed (%d)\n", bytes, rc);
      return nullptr;
    }
    return reinterpret_cast<void*>(static_cast<uintptr_t>(dp));
  });
  return *f;
}

void count(std::atomic<uint64_t>& ns, std::atomic<uint64_t>& calls, uint64_t t0) {
  ns.fetch_add(now_ns() - t0, std::memory_order_relaxed);
  calls.fetch_add(1, std::memory_order_relaxed);
}

}  // namespace

PROBE_API void* probe_floor_alloc(ssize_t size, int device, void*) {
  const uint64_t t0 = now_ns();
  if (size <= 0) return nullptr;
  t_device = device;
  void* p = floor_cache().alloc(static_cast<size_t>(size));
  if (p != nullptr) count(g_alloc_ns, g_allocs, t0);
  return p;
}

PROBE_API void probe_floor_free(void* ptr, ssize_t, int, void*) {
  const uint64_t t0 = now_ns();
  if (ptr == nullptr) return;
  if (!floor_cache().free(ptr)) {
    std::fprintf(stderr, "torch_alloc_probe: free of %p, which the floor did not hand out\n", ptr);
    return;
  }
  count(g_free_ns, g_frees, t0);
}

// alloc and free: the addresses of the pair to time. Call before torch
// allocates through probe_timed_*; returns 0, or -1 when either is NULL.
PROBE_API int probe_set_target(void* alloc, void* free) {
  if (alloc == nullptr || free == nullptr) return -1;
  g_target_alloc.store(reinterpret_cast<AllocFn>(alloc));
  g_target_free.store(reinterpret_cast<FreeFn>(free));
  return 0;
}

PROBE_API void* probe_timed_alloc(ssize_t size, int device, void* stream) {
  AllocFn fn = g_target_alloc.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    std::fprintf(stderr, "torch_alloc_probe: probe_timed_alloc before probe_set_target\n");
    return nullptr;
  }
  const uint64_t t0 = now_ns();
  void* p = fn(size, device, stream);
  count(g_alloc_ns, g_allocs, t0);
  return p;
}

PROBE_API void probe_timed_free(void* ptr, ssize_t size, int device, void* stream) {
  FreeFn fn = g_target_free.load(std::memory_order_relaxed);
  if (fn == nullptr) {
    std::fprintf(stderr, "torch_alloc_probe: probe_timed_free before probe_set_target\n");
    return;
  }
  const uint64_t t0 = now_ns();
  fn(ptr, size, device, stream);
  count(g_free_ns, g_frees, t0);
}

// out[0..3]: nanoseconds in alloc, alloc calls, nanoseconds in free, free
// calls, over both pairs since the module was loaded.
PROBE_API void probe_read(uint64_t* out) {
  out[0] = g_alloc_ns.load();
  out[1] = g_allocs.load();
  out[2] = g_free_ns.load();
  out[3] = g_frees.load();
}
