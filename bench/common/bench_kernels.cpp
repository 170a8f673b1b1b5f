#include "bench_kernels.hpp"

#include <fstream>

namespace bench {

BenchKernels::~BenchKernels() {
  if (raw_module != nullptr && api != nullptr) api->moduleUnload(raw_module);
}

bool load_bench_kernels(GpuSession* s, BenchKernels* k, Report* report, const std::string& what) {
  const std::string path = kernels_path();
  if (path.empty() || !std::ifstream(path).good()) {
    report->skip(what, "test-kernel fatbin not found (" + (path.empty() ? std::string("no path") : path) +
                           "): build with -Dkernels=enabled or set METRALE_BENCH_KERNELS");
    return false;
  }
  metrale_status_t st = metrale_module_load_file(s->ctx, "test_kernels", path.c_str());
  if (st == METRALE_OK) st = metrale_kernel_get(s->ctx, "test_kernels", "empty_kernel", &k->lib_empty);
  if (st == METRALE_OK) st = metrale_kernel_get(s->ctx, "test_kernels", "fill_u32", &k->lib_fill);
  if (st != METRALE_OK) {
    report->skip(what, std::string("library module load: ") + metrale_status_name(st) + ": " +
                           metrale_last_error_message());
    return false;
  }
  k->api = &s->api;
  CUresult rc = s->api.moduleLoad(&k->raw_module, path.c_str());
  if (rc == CUDA_SUCCESS) rc = s->api.moduleGetFunction(&k->raw_empty, k->raw_module, "empty_kernel");
  if (rc == CUDA_SUCCESS) rc = s->api.moduleGetFunction(&k->raw_fill, k->raw_module, "fill_u32");
  if (rc != CUDA_SUCCESS) {
    report->skip(what, "raw cuModuleLoad: " + raw_error(s->api, rc));
    return false;
  }
  return true;
}

}  // namespace bench
