// Anchor: PyTorch's CUDA caching allocator from C++ (raw_alloc/raw_delete),
// at the sizes bench_alloc measures, so the JSON holds it beside the library
// and the raw driver. Built by bench/run.sh on the GPU machine against the
// torch package of its python3 (not by meson: torch is not a dependency).
// Usage: torch_alloc [OUT.json]
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>

#include <exception>
#include <string>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"

using namespace bench;

namespace {
std::string size_label(size_t bytes) {
  if (bytes >= (1u << 20)) return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}
}  // namespace

int main(int argc, char** argv) {
  Report report("torch_alloc");
  report.meta("anchor", "PyTorch c10::cuda::CUDACachingAllocator::raw_alloc/raw_delete (C++)");
  try {
    int devices = c10::cuda::device_count();
    if (devices < 1) {
      report.skip("alloc_free/*/torch_cpp_caching_allocator", "torch sees no CUDA device");
      return report.write(output_path(argc, argv)) ? 0 : 1;
    }
    c10::cuda::CUDACachingAllocator::init(devices);
    for (size_t bytes : {size_t{256}, size_t{64} << 10, size_t{1} << 20, size_t{64} << 20}) {
      const std::string base = "alloc_free/" + size_label(bytes) + "/";
      size_t batch = bytes >= (64u << 20) ? 20 : bytes >= (1u << 20) ? 200 : 500;
      std::vector<Case> cases = {{base + "torch_cpp_caching_allocator", [bytes](size_t n) {
                                    for (size_t i = 0; i < n; ++i) {
                                      void* p = c10::cuda::CUDACachingAllocator::raw_alloc(bytes);
                                      c10::cuda::CUDACachingAllocator::raw_delete(p);
                                    }
                                    return true;
                                  }, nullptr}};
      auto results = run_interleaved(cases, 15, batch);
      Entry e;
      e.group = "alloc_free";
      e.variant = "torch_cpp_caching_allocator";
      e.side = "anchor";
      e.size_bytes = static_cast<double>(bytes);
      e.batch = batch;
      e.raw_ref = base + "raw_cuMemAlloc";
      e.timing = "raw_alloc immediately followed by raw_delete, per op; served from the cache "
                 "after warm-up; no sync";
      add_case(&report, results[0], e);
    }
  } catch (const std::exception& ex) {
    report.skip("alloc_free/*/torch_cpp_caching_allocator", std::string("torch threw: ") + ex.what());
  }
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
