// Kernel launch (void** params and packed) against cuLaunchKernel; event
// record against cuEventRecord; metrale_stream_is_capturing against
// cuStreamIsCapturing. Launches and records are timed as enqueue cost: the
// stream is synchronized after each batch, outside the timed region.
// Usage: bench_launch [OUT.json]
#include <functional>
#include <vector>

#include "bench_json.hpp"
#include "bench_kernels.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

// The goals are differences of tens of ns between medians of figures that
// spread by about a microsecond (p10-p90 of a launch on the H200): with 21
// rounds the medians' own error (~130 ns) swamped them; 201 rounds cost
// about 2 s per group and bring it near 40 ns.
constexpr size_t kRepeats = 201;
constexpr metrale_dim3_t kOne = {1, 1, 1};

void add_all(Report* report, const std::vector<CaseResult>& results, const std::string& group,
             size_t batch, const std::string& timing, Target lib_target) {
  for (const auto& r : results) {
    Entry e;
    e.group = group;
    e.variant = r.id.substr(group.size() + 1);
    e.batch = batch;
    e.timing = timing;
    if (e.variant.rfind("library", 0) == 0) {
      e.side = "library";
      e.raw_ref = group + "/raw" + e.variant.substr(std::string("library").size());
      e.target = lib_target;
    } else {
      e.side = "raw";
    }
    add_case(report, r, e);
  }
}

// f<<<1,1>>> launched raw (cuLaunchKernel) on s, n times per batch; params
// or extra as cuLaunchKernel takes them (both may be NULL). The arrays must
// outlive the case.
Case raw_launch(const std::string& id, const RawDriver& api, CUfunction f, CUstream s,
                void** params, void** extra, std::function<void()> after) {
  const char* call = extra != nullptr ? "cuLaunchKernel(extra)" : "cuLaunchKernel";
  return {id, [&api, f, s, params, extra, call](size_t n) {
            for (size_t i = 0; i < n; ++i)
              if (!raw_ok(api, api.launchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, params, extra), call))
                return false;
            return true;
          }, std::move(after)};
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_launch");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "launch")) return report.write(output_path(argc, argv)) ? 0 : 1;
  const RawDriver& api = s.api;
  metrale_context_t* ctx = s.ctx;
  metrale_stream_t* ls = s.lib_stream;
  CUstream rs = s.raw_stream;
  auto sync_both = [&] {
    metrale_stream_synchronize(ctx, ls);
    api.streamSynchronize(rs);
  };

  BenchKernels k;
  if (load_bench_kernels(&s, &k, &report, "launch")) {
    metrale_devptr_t buf = 0;
    metrale_alloc(ctx, 256, &buf);
    FillArgs packed = {buf, 7, 0, 0};
    uint64_t p = buf, n = 0;
    uint32_t value = 7;
    void* params[] = {&p, &value, &n};
    size_t packed_size = sizeof packed;
    void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &packed, CU_LAUNCH_PARAM_BUFFER_SIZE,
                     &packed_size, CU_LAUNCH_PARAM_END};
    const size_t batch = 500;
    std::vector<Case> empty = {
        {"launch_empty/library", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!lib_ok(metrale_launch(ctx, k.lib_empty, kOne, kOne, 0, ls, nullptr), "metrale_launch"))
               return false;
           return true;
         }, sync_both},
        raw_launch("launch_empty/raw", api, k.raw_empty, rs, nullptr, nullptr, sync_both)};
    // A diagnosis, not a goal: the raw launch on the library's own stream
    // (metrale_stream_native). Near launch_empty/library, the gap to
    // launch_empty/raw lies in the driver's stream, not in the library's code.
    void* lib_native = nullptr;
    if (metrale_stream_native(ctx, ls, &lib_native) == METRALE_OK && lib_native != nullptr) {
      CUstream lns = static_cast<CUstream>(lib_native);
      empty.push_back(raw_launch("launch_empty/raw_on_library_stream", api, k.raw_empty, lns,
                                 nullptr, nullptr, sync_both));
    }
    // A diagnosis, not a goal: the library's own CUfunction (metrale_kernel_native)
    // launched raw on the raw stream. Near launch_empty/library, the gap to
    // launch_empty/raw lies in the driver's function, not in the library's code.
    void* lib_func = nullptr;
    if (metrale_kernel_native(ctx, k.lib_empty, &lib_func) == METRALE_OK && lib_func != nullptr) {
      empty.push_back(raw_launch("launch_empty/raw_library_function", api,
                                 static_cast<CUfunction>(lib_func), rs, nullptr, nullptr, sync_both));
    }
    add_all(&report, run_interleaved(empty, kRepeats, batch), "launch_empty", batch,
            "enqueue only: empty_kernel<<<1,1>>> without parameters, stream synced after each "
            "batch outside the timed region", {Target::DIFF_NS, 50});

    std::vector<Case> fill = {
        {"launch_3params/library_params", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!lib_ok(metrale_launch(ctx, k.lib_fill, kOne, kOne, 0, ls, params), "metrale_launch"))
               return false;
           return true;
         }, sync_both},
        {"launch_3params/library_packed", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!lib_ok(metrale_launch_packed(ctx, k.lib_fill, kOne, kOne, 0, ls, &packed, sizeof packed),
                         "metrale_launch_packed"))
               return false;
           return true;
         }, sync_both},
        raw_launch("launch_3params/raw_params", api, k.raw_fill, rs, params, nullptr, sync_both),
        raw_launch("launch_3params/raw_packed", api, k.raw_fill, rs, nullptr, extra, sync_both)};
    // A diagnosis: the library asks the driver for each kernel's parameter
    // layout (cuFuncGetParamInfo) when it looks the kernel up. This row
    // launches a raw function of a second raw module that was asked the same,
    // so a driver cost left by that query shows here, not in library_params.
    CUmodule queried_module = nullptr;
    CUfunction queried_fill = nullptr;
    if (api.funcGetParamInfo != nullptr &&
        api.moduleLoad(&queried_module, kernels_path().c_str()) == CUDA_SUCCESS &&
        api.moduleGetFunction(&queried_fill, queried_module, "fill_u32") == CUDA_SUCCESS) {
      size_t offset = 0, size = 0;
      for (size_t i = 0; api.funcGetParamInfo(queried_fill, i, &offset, &size) == CUDA_SUCCESS; ++i) {
      }
      fill.push_back(raw_launch("launch_3params/raw_after_param_info", api, queried_fill, rs,
                                params, nullptr, sync_both));
    } else {
      report.skip("launch_3params/raw_after_param_info",
                  "no cuFuncGetParamInfo in this driver, or the second module did not load");
    }
    // The same diagnosis with parameters.
    if (metrale_stream_native(ctx, ls, &lib_native) == METRALE_OK && lib_native != nullptr) {
      CUstream lns = static_cast<CUstream>(lib_native);
      fill.push_back(raw_launch("launch_3params/raw_on_library_stream", api, k.raw_fill, lns,
                                params, nullptr, sync_both));
    }
    void* lib_fill = nullptr;
    if (metrale_kernel_native(ctx, k.lib_fill, &lib_fill) == METRALE_OK && lib_fill != nullptr) {
      fill.push_back(raw_launch("launch_3params/raw_library_function", api,
                                static_cast<CUfunction>(lib_fill), rs, params, nullptr, sync_both));
    }
    add_all(&report, run_interleaved(fill, kRepeats, batch), "launch_3params", batch,
            "enqueue only: fill_u32<<<1,1>>>(p, 7, n=0) (24 bytes of parameters), stream synced "
            "after each batch outside the timed region", {Target::DIFF_NS, 50});
    if (queried_module != nullptr) api.moduleUnload(queried_module);
    metrale_free(ctx, buf);
  }

  // Event record and the capture query need no kernels.
  metrale_event_t* lev = nullptr;
  CUevent rev = nullptr;
  if (lib_ok(metrale_event_create(ctx, METRALE_EVENT_DEFAULT, &lev), "metrale_event_create") &&
      raw_ok(api, api.eventCreate(&rev, CU_EVENT_DEFAULT), "cuEventCreate")) {
    const size_t batch = 1000;
    std::vector<Case> rec = {
        {"event_record/library", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!lib_ok(metrale_event_record(ctx, lev, ls), "metrale_event_record")) return false;
           return true;
         }, sync_both},
        {"event_record/raw", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!raw_ok(api, api.eventRecord(rev, rs), "cuEventRecord")) return false;
           return true;
         }, sync_both}};
    add_all(&report, run_interleaved(rec, kRepeats, batch), "event_record", batch,
            "enqueue only, timing event on an idle non-blocking stream; synced after each batch "
            "outside the timed region", {Target::RATIO, 1.02});
  } else {
    report.skip("event_record", "event creation failed");
  }
  metrale_event_destroy(ctx, lev);
  if (rev != nullptr) api.eventDestroy(rev);

  const size_t qbatch = 10000;
  std::vector<Case> q = {
      {"stream_is_capturing/library", [&](size_t m) {
         int sum = 0;
         for (size_t i = 0; i < m; ++i) sum += metrale_stream_is_capturing(ctx, ls);
         if (sum != 0) note_failure("metrale_stream_is_capturing answered 1 on an idle stream");
         return sum == 0;
       }, nullptr},
      {"stream_is_capturing/raw", [&](size_t m) {
         for (size_t i = 0; i < m; ++i) {
           CUstreamCaptureStatus st;
           if (!raw_ok(api, api.streamIsCapturing(rs, &st), "cuStreamIsCapturing")) return false;
         }
         return true;
       }, nullptr}};
  add_all(&report, run_interleaved(q, kRepeats, qbatch), "stream_is_capturing", qbatch,
          "a query on an idle stream that is not capturing", {Target::DIFF_NS, 10});
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
