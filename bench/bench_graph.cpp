// A 100-kernel graph: capture + instantiate (+ destroy) through the library
// against raw stream capture and cuGraphInstantiateWithFlags, and the replay
// (metrale_graph_launch against cuGraphLaunch, enqueue only).
// Usage: bench_graph [OUT.json]
#include <vector>

#include "bench_json.hpp"
#include "bench_kernels.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

constexpr size_t kKernels = 100;
constexpr size_t kRepeats = 15;
constexpr metrale_dim3_t kOne = {1, 1, 1};

bool lib_build(metrale_context_t* ctx, metrale_stream_t* s, metrale_kernel_t* k, metrale_graph_t** g) {
  if (!lib_ok(metrale_graph_begin_capture(ctx, s), "metrale_graph_begin_capture")) return false;
  for (size_t i = 0; i < kKernels; ++i)
    if (!lib_ok(metrale_launch(ctx, k, kOne, kOne, 0, s, nullptr), "metrale_launch (capturing)")) {
      metrale_graph_abort_capture(ctx, s);
      return false;
    }
  return lib_ok(metrale_graph_end_capture(ctx, s, g), "metrale_graph_end_capture");
}

bool raw_build(const RawDriver& api, CUstream s, CUfunction f, CUgraph* graph, CUgraphExec* exec) {
  if (!raw_ok(api, api.streamBeginCapture(s, CU_STREAM_CAPTURE_MODE_THREAD_LOCAL),
              "cuStreamBeginCapture"))
    return false;
  for (size_t i = 0; i < kKernels; ++i)
    if (!raw_ok(api, api.launchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, nullptr, nullptr),
                "cuLaunchKernel (capturing)")) {
      CUgraph dropped = nullptr;
      api.streamEndCapture(s, &dropped);
      if (dropped != nullptr) api.graphDestroy(dropped);
      return false;
    }
  if (!raw_ok(api, api.streamEndCapture(s, graph), "cuStreamEndCapture")) return false;
  return raw_ok(api, api.graphInstantiateWithFlags(exec, *graph, 0), "cuGraphInstantiateWithFlags");
}

void add_pair(Report* report, const std::vector<CaseResult>& results, const std::string& group,
              size_t batch, const std::string& timing, Target target) {
  for (const auto& r : results) {
    Entry e;
    e.group = group;
    e.variant = r.id.substr(group.size() + 1);
    e.side = e.variant == "library" ? "library" : "raw";
    if (e.side == "library") {
      e.raw_ref = group + "/raw";
      e.target = target;
    }
    e.batch = batch;
    e.timing = timing;
    add_case(report, r, e);
  }
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_graph");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "graph")) return report.write(output_path(argc, argv)) ? 0 : 1;
  BenchKernels k;
  if (!load_bench_kernels(&s, &k, &report, "graph")) return report.write(output_path(argc, argv)) ? 0 : 1;
  const RawDriver& api = s.api;
  metrale_context_t* ctx = s.ctx;
  metrale_stream_t* ls = s.lib_stream;
  CUstream rs = s.raw_stream;

  const size_t build_batch = 5;
  std::vector<Case> build = {
      {"graph100_build/library", [&](size_t m) {
         for (size_t i = 0; i < m; ++i) {
           metrale_graph_t* g = nullptr;
           if (!lib_build(ctx, ls, k.lib_empty, &g)) return false;
           metrale_graph_destroy(ctx, g);
         }
         return true;
       }, nullptr},
      {"graph100_build/raw", [&](size_t m) {
         for (size_t i = 0; i < m; ++i) {
           CUgraph g = nullptr;
           CUgraphExec x = nullptr;
           bool ok = raw_build(api, rs, k.raw_empty, &g, &x);
           if (x != nullptr) api.graphExecDestroy(x);
           if (g != nullptr) api.graphDestroy(g);
           if (!ok) return false;
         }
         return true;
       }, nullptr}};
  add_pair(&report, run_interleaved(build, kRepeats, build_batch), "graph100_build", build_batch,
           "begin capture, 100 empty_kernel launches, end capture, instantiate, destroy; per graph",
           {Target::RATIO, 1.02});

  metrale_graph_t* lg = nullptr;
  CUgraph rg = nullptr;
  CUgraphExec rx = nullptr;
  bool have_lib = lib_build(ctx, ls, k.lib_empty, &lg);
  if (!have_lib) report.skip("graph100_launch", "library capture failed");
  bool have_raw = raw_build(api, rs, k.raw_empty, &rg, &rx);
  if (!have_raw) report.skip("graph100_launch", "raw capture failed");
  if (have_lib && have_raw) {
    const size_t batch = 20;
    auto sync_both = [&] {
      metrale_stream_synchronize(ctx, ls);
      api.streamSynchronize(rs);
    };
    std::vector<Case> launch = {
        {"graph100_launch/library", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!lib_ok(metrale_graph_launch(ctx, lg, ls), "metrale_graph_launch")) return false;
           return true;
         }, sync_both},
        {"graph100_launch/raw", [&](size_t m) {
           for (size_t i = 0; i < m; ++i)
             if (!raw_ok(api, api.graphLaunch(rx, rs), "cuGraphLaunch")) return false;
           return true;
         }, sync_both}};
    add_pair(&report, run_interleaved(launch, kRepeats, batch), "graph100_launch", batch,
             "enqueue only, one replay of a 100-kernel graph per op; stream synced after each "
             "batch outside the timed region",
             {Target::DIFF_NS, 50});
  }
  metrale_graph_destroy(ctx, lg);
  if (rx != nullptr) api.graphExecDestroy(rx);
  if (rg != nullptr) api.graphDestroy(rg);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
