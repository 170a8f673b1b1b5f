#include "gpu_session.hpp"

#include <cstdlib>

#include "bench_stats.hpp"

#ifndef BENCH_KERNELS_PATH
#define BENCH_KERNELS_PATH ""
#endif

namespace bench {

GpuSession::~GpuSession() {
  if (raw_stream != nullptr && api.streamDestroy != nullptr) api.streamDestroy(raw_stream);
  metrale_context_destroy(ctx);
}

bool lib_ok(metrale_status_t st, const char* call) {
  if (st == METRALE_OK) return true;
  note_failure(std::string(call) + ": " + metrale_status_name(st) + ": " +
               metrale_last_error_message());
  return false;
}

bool raw_ok(const RawDriver& api, CUresult rc, const char* call) {
  if (rc == CUDA_SUCCESS) return true;
  note_failure(std::string(call) + ": " + raw_error(api, rc));
  return false;
}

metrale_context_t* make_cuda_context(size_t redzone_bytes, int checked_pointers) {
  metrale_context_options_t opts;
  metrale_context_options_init(&opts);
  opts.backend = METRALE_BACKEND_CUDA;
  opts.redzone_bytes = redzone_bytes;
  opts.checked_pointers = checked_pointers;
  metrale_context_t* ctx = nullptr;
  if (!lib_ok(metrale_context_create(&opts, &ctx), "metrale_context_create")) return nullptr;
  return ctx;
}

bool open_gpu_session(GpuSession* s, Report* report, const std::string& what) {
  std::string why;
  if (!open_raw_driver(0, &s->api, &s->dev, &why)) {
    report->skip(what, "raw driver: " + why);
    return false;
  }
  char name[256] = {0};
  int version = 0;
  s->api.deviceGetName(name, sizeof name - 1, s->dev);
  s->api.driverGetVersion(&version);
  report->meta("device_name", name);
  report->meta_number("driver_api_version", version);
  report->meta("backend", "cuda");
  CUresult rc = s->api.streamCreate(&s->raw_stream, CU_STREAM_NON_BLOCKING);
  if (rc != CUDA_SUCCESS) {
    report->skip(what, "cuStreamCreate: " + raw_error(s->api, rc));
    return false;
  }
  // Environment overrides would change what is measured; the bench sets
  // every option itself.
  for (const char* var : {"METRALE_BACKEND", "METRALE_REDZONE", "METRALE_REDZONE_MIN_IDX",
                          "METRALE_CHECKED", "METRALE_DEBUG_SYNC", "METRALE_LAUNCH_TRACE",
                          "METRALE_KERNEL_TIMING"})
    unsetenv(var);
  s->ctx = make_cuda_context(0, 0);
  if (s->ctx == nullptr) {
    report->skip(what, "library context: " + std::string(metrale_last_error_message()));
    return false;
  }
  s->lib_stream = metrale_default_stream(s->ctx);
  metrale_device_info_t info;
  if (metrale_device_info(s->ctx, &info) == METRALE_OK && info.name != std::string(name))
    report->meta("library_device_name", info.name);
  return true;
}

std::string kernels_path() {
  const char* env = std::getenv("METRALE_BENCH_KERNELS");
  if (env != nullptr && *env != '\0') return env;
  return BENCH_KERNELS_PATH;
}

std::string size_label(size_t bytes) {
  if (bytes >= (1ull << 30) && bytes % (1ull << 30) == 0)
    return std::to_string(bytes >> 30) + "GiB";
  if (bytes >= (1ull << 20) && bytes % (1ull << 20) == 0)
    return std::to_string(bytes >> 20) + "MiB";
  if (bytes >= 1024 && bytes % 1024 == 0) return std::to_string(bytes >> 10) + "KiB";
  return std::to_string(bytes) + "B";
}

}  // namespace bench
