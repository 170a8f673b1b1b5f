// Several devices (issue 13): peer copies through the library against the
// raw driver's cuMemcpyPeerAsync, and NCCL's all-reduce over buffers the
// library allocated against the same all-reduce over raw cuMemAlloc
// buffers, with algbw and busbw as nccl-tests defines them.
//
// Peer copies go from a context on device 0 to a context on device 1, or,
// with one GPU, to a second context on device 0 (self-peer: both sides
// then copy within one primary context). Every figure waits for the copy.
// All-reduce: one thread and one context per GPU (every GPU of the host),
// float sums, out of place; a figure is the time of one all-reduce, from
// `batch` back-to-back calls on each rank and one wait, the slowest rank
// counting. algbw = bytes / time; busbw = algbw x 2(n-1)/n (nccl-tests'
// all-reduce factor: 0 with one rank). NCCL is opened at run time
// (examples/nccl_loader.h) with NCCL_NVLS_ENABLE=0: no NVLink multicast.
// Usage: bench_peer [OUT.json]
#include <dlfcn.h>

#include <condition_variable>
#include <cstdio>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "gpu_session.hpp"
#include "nccl_loader.h"

using namespace bench;

namespace {

using PeerAsync = CUresult(CUDAAPI*)(CUdeviceptr, CUcontext, CUdeviceptr, CUcontext, size_t,
                                     CUstream);

metrale_context_t* context_on(int device) {
  metrale_context_options_t o;
  metrale_context_options_init(&o);
  o.backend = METRALE_BACKEND_CUDA;
  o.device = device;
  metrale_context_t* ctx = nullptr;
  if (!lib_ok(metrale_context_create(&o, &ctx), "metrale_context_create")) return nullptr;
  return ctx;
}

void add_row(Report* report, const CaseResult& r, const std::string& group, size_t bytes,
             size_t batch, const std::string& raw_variant, const std::string& timing,
             const std::string& note) {
  Entry e;
  e.group = group;
  e.variant = r.id.substr(group.size() + 1);
  e.size_bytes = static_cast<double>(bytes);
  e.batch = batch;
  e.timing = timing;
  e.note = note;
  if (e.variant.rfind("library", 0) == 0) {
    e.side = "library";
    e.raw_ref = group + "/" + raw_variant;
    e.target = {Target::RATIO, 1.02};
  } else {
    e.side = "raw";
  }
  add_case(report, r, e);
}

void peer_copies(GpuSession& s, Report* report, int devices) {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  auto peer_async = lib != nullptr ? reinterpret_cast<PeerAsync>(dlsym(lib, "cuMemcpyPeerAsync"))
                                   : nullptr;
  if (peer_async == nullptr) {
    report->skip("copy_peer_*", "libcuda.so.1 has no cuMemcpyPeerAsync");
    return;
  }
  const int dst_dev = devices >= 2 ? 1 : 0;
  const std::string pair = devices >= 2 ? "device 0 -> device 1" : "self-peer, one GPU (device 0 -> device 0)";
  metrale_context_t* b = context_on(dst_dev);
  CUdevice d1 = 0;
  CUcontext c0 = nullptr, c1 = nullptr;
  if (b == nullptr || s.api.primaryCtxRetain(&c0, s.dev) != CUDA_SUCCESS ||
      s.api.deviceGet(&d1, dst_dev) != CUDA_SUCCESS ||
      s.api.primaryCtxRetain(&c1, d1) != CUDA_SUCCESS) {
    report->skip("copy_peer_*", "second context or the primary contexts could not be opened");
    metrale_context_destroy(b);
    return;
  }
  if (devices >= 2) {
    metrale_status_t st = metrale_peer_access_enable(s.ctx, b);
    report->meta("peer_access_0_to_1", st == METRALE_OK ? "enabled"
                                                        : std::string("refused: ") +
                                                              metrale_last_error_message());
  }
  report->meta("peer_pair", pair);
  metrale_context_t* a = s.ctx;
  metrale_stream_t* ls = nullptr;
  metrale_stream_create(a, &ls);
  for (size_t bytes : {size_t{1} << 20, size_t{64} << 20, size_t{1} << 30}) {
    metrale_devptr_t src = 0, dst = 0;
    if (!lib_ok(metrale_alloc(a, bytes, &src), "metrale_alloc") ||
        !lib_ok(metrale_alloc(b, bytes, &dst), "metrale_alloc")) {
      report->skip("copy_peer_" + size_label(bytes), "allocation failed");
      continue;
    }
    metrale_memset(a, src, 1, bytes);
    const std::string g = "copy_peer_" + size_label(bytes);
    CUstream rs = s.raw_stream;
    const RawDriver& api = s.api;
    std::vector<Case> cases = {
        {g + "/library", [=](size_t n) {
           for (size_t i = 0; i < n; ++i)
             if (!lib_ok(metrale_copy_peer(a, src, b, dst, bytes), "metrale_copy_peer")) return false;
           return true;
         }, nullptr},
        {g + "/library_async", [=](size_t n) {
           for (size_t i = 0; i < n; ++i) {
             if (!lib_ok(metrale_copy_peer_async(a, src, b, dst, bytes, ls), "metrale_copy_peer_async") ||
                 !lib_ok(metrale_stream_synchronize(a, ls), "metrale_stream_synchronize"))
               return false;
           }
           return true;
         }, nullptr},
        {g + "/raw_cuMemcpyPeerAsync", [=, &api](size_t n) {
           for (size_t i = 0; i < n; ++i) {
             if (!raw_ok(api, peer_async(dst, c1, src, c0, bytes, rs), "cuMemcpyPeerAsync") ||
                 !raw_ok(api, api.streamSynchronize(rs), "cuStreamSynchronize"))
               return false;
           }
           return true;
         }, nullptr}};
    const size_t batch = bytes >= (size_t{1} << 30) ? 2 : 10;
    for (const auto& r : run_interleaved(cases, 11, batch, 1)) {
      add_row(report, r, g, bytes, batch, "raw_cuMemcpyPeerAsync",
              "each copy waits for its stream; GB/s = bytes / median", pair);
    }
    metrale_free(a, src);
    metrale_free(b, dst);
  }
  metrale_stream_destroy(a, ls);
  metrale_context_destroy(b);
  s.api.primaryCtxRelease(s.dev);
  s.api.primaryCtxRelease(d1);
}

// One thread per rank, kept for the whole run: run(n, raw) makes every rank
// do n all-reduces and one wait, and returns when all have.
class Ranks {
 public:
  Ranks(const nccl_api_t& nccl, int n, size_t bytes) : nccl_(nccl), n_(n), bytes_(bytes) {
    nccl_.GetUniqueId(&id_);
    for (int r = 0; r < n; ++r) threads_.emplace_back([this, r] { body(r); });
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return ready_ == n_; });
  }
  ~Ranks() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stop_ = true;
      ++generation_;
    }
    cv_.notify_all();
    for (auto& t : threads_) t.join();
  }
  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  bool run(size_t iters, bool raw) {
    std::unique_lock<std::mutex> lock(mutex_);
    iters_ = iters;
    raw_ = raw;
    done_ = 0;
    ++generation_;
    cv_.notify_all();
    cv_.wait(lock, [&] { return done_ == n_; });
    if (!error_.empty()) note_failure(error_);
    return error_.empty();
  }

 private:
  void fail(const std::string& why) {
    std::lock_guard<std::mutex> lock(mutex_);
    if (error_.empty()) error_ = why;
  }
  void body(int r) {
    metrale_context_t* ctx = context_on(r);
    metrale_devptr_t send = 0, recv = 0;
    CUdeviceptr rsend = 0, rrecv = 0;
    void* stream = nullptr;
    ncclComm_t comm = nullptr;
    RawDriver api{};
    CUdevice dev = 0;
    std::string why;
    const bool raw_open = open_raw_driver(r, &api, &dev, &why);
    bool good = raw_open && ctx != nullptr && metrale_alloc(ctx, bytes_, &send) == METRALE_OK &&
                metrale_alloc(ctx, bytes_, &recv) == METRALE_OK &&
                metrale_memset(ctx, send, 0, bytes_) == METRALE_OK &&
                metrale_context_bind_thread(ctx) == METRALE_OK &&
                metrale_stream_native(ctx, nullptr, &stream) == METRALE_OK &&
                api.memAlloc(&rsend, bytes_) == CUDA_SUCCESS &&
                api.memAlloc(&rrecv, bytes_) == CUDA_SUCCESS &&
                api.memsetD8Async(rsend, 0, bytes_, static_cast<CUstream>(stream)) == CUDA_SUCCESS;
    if (!good) fail("rank " + std::to_string(r) + " setup: " + metrale_last_error_message() + why);
    ncclResult_t nr = nccl_.CommInitRank(&comm, n_, id_, r);  // every rank must join
    if (nr != 0) fail(std::string("ncclCommInitRank: ") + nccl_error(&nccl_, nr));
    {
      std::lock_guard<std::mutex> lock(mutex_);
      ++ready_;
    }
    cv_.notify_all();
    uint64_t seen = 0;
    for (;;) {
      size_t iters;
      bool raw;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        cv_.wait(lock, [&] { return generation_ != seen; });
        seen = generation_;
        if (stop_) break;
        iters = iters_;
        raw = raw_;
      }
      if (ok()) {
        const void* sb = raw ? reinterpret_cast<void*>(rsend) : reinterpret_cast<void*>(send);
        void* rb = raw ? reinterpret_cast<void*>(rrecv) : reinterpret_cast<void*>(recv);
        for (size_t i = 0; i < iters && ok(); ++i) {
          nr = nccl_.AllReduce(sb, rb, bytes_ / sizeof(float), METRALE_NCCL_FLOAT32,
                               METRALE_NCCL_SUM, comm, stream);
          if (nr != 0) fail(std::string("ncclAllReduce: ") + nccl_error(&nccl_, nr));
        }
        if (metrale_stream_synchronize(ctx, nullptr) != METRALE_OK)
          fail(std::string("metrale_stream_synchronize: ") + metrale_last_error_message());
      }
      {
        std::lock_guard<std::mutex> lock(mutex_);
        ++done_;
      }
      cv_.notify_all();
    }
    if (comm != nullptr) nccl_.CommDestroy(comm);
    if (rsend != 0) api.memFree(rsend);
    if (rrecv != 0) api.memFree(rrecv);
    if (raw_open) api.primaryCtxRelease(dev);  // open_raw_driver's retain
    if (ctx != nullptr) {
      metrale_free(ctx, send);
      metrale_free(ctx, recv);
      metrale_context_destroy(ctx);
    }
  }

  const nccl_api_t& nccl_;
  const int n_;
  const size_t bytes_;
  ncclUniqueId id_{};
  std::vector<std::thread> threads_;
  std::mutex mutex_;
  std::condition_variable cv_;
  int ready_ = 0, done_ = 0;
  uint64_t generation_ = 0;
  size_t iters_ = 0;
  bool raw_ = false, stop_ = false;
  std::string error_;
};

void all_reduce(Report* report, int devices) {
  char why[8192];
  nccl_api_t nccl;
  if (nccl_load(&nccl, why, sizeof why) != 0) {
    report->skip("allreduce_*", std::string("NCCL not found: ") + why);
    return;
  }
  int version = 0;
  nccl.GetVersion(&version);
  report->meta_number("nccl_version", version);
  report->meta("nccl_path", nccl.path);
  report->meta("nccl_nvls_enable", getenv("NCCL_NVLS_ENABLE"));
  const int n = devices;
  const double factor = 2.0 * (n - 1) / n;
  std::fprintf(stderr, "#  all-reduce, %d rank(s), float sum, out of place (nccl-tests columns)\n", n);
  std::fprintf(stderr, "#  %12s %12s %10s %10s %10s  %s\n", "size(B)", "count", "time(us)",
               "algbw", "busbw", "buffers");
  for (size_t bytes : {size_t{8} << 20, size_t{256} << 20}) {
    Ranks ranks(nccl, n, bytes);
    if (!ranks.ok()) {
      report->skip("allreduce_" + size_label(bytes), ranks.error());
      continue;
    }
    const std::string g = "allreduce_" + size_label(bytes);
    const std::string tag = std::to_string(n) + "rank" + (n == 1 ? "" : "s");
    std::vector<Case> cases = {
        {g + "/library_buffers_" + tag, [&](size_t k) { return ranks.run(k, false); }, nullptr},
        {g + "/raw_cuMemAlloc_buffers_" + tag, [&](size_t k) { return ranks.run(k, true); },
         nullptr}};
    const size_t batch = bytes >= (size_t{256} << 20) ? 5 : 20;
    for (const auto& r : run_interleaved(cases, 9, batch, 1)) {
      std::string note = "NCCL all-reduce over " + tag + "; ";
      if (r.ok && r.stats.median > 0) {
        const double algbw = static_cast<double>(bytes) / r.stats.median;  // GB/s
        char buf[200];
        std::snprintf(buf, sizeof buf, "algbw %.1f GB/s, busbw %.1f GB/s (x %.3f)", algbw,
                      algbw * factor, factor);
        note += buf;
        std::fprintf(stderr, "   %12zu %12zu %10.1f %10.2f %10.2f  %s\n", bytes,
                     bytes / sizeof(float), r.stats.median / 1000.0, algbw, algbw * factor,
                     r.id.c_str());
      }
      add_row(report, r, g, bytes, batch, "raw_cuMemAlloc_buffers_" + tag,
              "batch all-reduces on every rank, then one wait; slowest rank; GB/s = algbw",
              note);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  setenv("NCCL_NVLS_ENABLE", "0", 1);  // before anything loads NCCL
  Report report("bench_peer");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "peer copies and all-reduce")) {
    return report.write(output_path(argc, argv)) ? 0 : 1;
  }
  int devices = 0;
  if (metrale_device_count(METRALE_BACKEND_CUDA, &devices) != METRALE_OK || devices < 1) devices = 1;
  report.meta_number("cuda_devices", devices);
  peer_copies(s, &report, devices);
  all_reduce(&report, devices);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
