// Copies and memsets through the library against the raw driver on the same
// kind of stream (a non-blocking stream, async call + cuStreamSynchronize,
// which is what the library's synchronous calls do), plus the legacy
// synchronous cuMemcpyHtoD/DtoH for reference: 64 B h2d/d2h, the same with
// checked pointers on, 1 GiB h2d/d2h pinned, 1 GiB d2d and memset, and the
// pageable rows of copy_staging.cpp (1 GiB with pinned staging on and off,
// 64 KiB .. 16 MiB, the ring/threads sweep). Every figure includes the wait
// for the copy to finish. Without a GPU only the pageable rows run, on the
// host backend. Usage: bench_copy [OUT.json]
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "bench_json.hpp"
#include "bench_stats.hpp"
#include "copy_staging.hpp"
#include "gpu_session.hpp"

using namespace bench;

namespace {

constexpr size_t kSmall = 64;
constexpr size_t kBig = size_t{1} << 30;
constexpr size_t kCheckedLive = 1000;

struct Row {
  std::string group, raw_variant, timing, note;
  Target target{Target::RATIO, 1.02};
};

void add_rows(Report* report, const std::vector<CaseResult>& results, size_t bytes, size_t batch,
              const Row& row) {
  for (const auto& r : results) {
    Entry e;
    e.group = row.group;
    e.variant = r.id.substr(row.group.size() + 1);
    e.size_bytes = static_cast<double>(bytes);
    e.batch = batch;
    e.timing = row.timing;
    if (e.variant.rfind("library", 0) == 0) {
      e.side = "library";
      e.raw_ref = row.group + "/" + row.raw_variant;
      e.target = row.target;
      if (e.variant.find("checked") != std::string::npos)
        e.note = "checked pointers on, " + std::to_string(kCheckedLive) +
                 " other live allocations in the context (issue 6)";
    } else {
      e.side = "raw";
    }
    if (!row.note.empty()) e.note += (e.note.empty() ? "" : "; ") + row.note;
    add_case(report, r, e);
  }
}

Case lib(const std::string& id, std::function<metrale_status_t()> op, const char* call) {
  return {id, [op, call](size_t n) {
            for (size_t i = 0; i < n; ++i)
              if (!lib_ok(op(), call)) return false;
            return true;
          }, nullptr};
}

Case raw_async(const std::string& id, const RawDriver& api, CUstream s,
               std::function<CUresult()> op, const char* call) {
  return {id, [&api, s, op, call](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              if (!raw_ok(api, op(), call)) return false;
              if (!raw_ok(api, api.streamSynchronize(s), "cuStreamSynchronize")) return false;
            }
            return true;
          }, nullptr};
}

}  // namespace

int main(int argc, char** argv) {
  Report report("bench_copy");
  GpuSession s;
  if (!open_gpu_session(&s, &report, "copy")) {
    host_pageable_rows(&report);
    return report.write(output_path(argc, argv)) ? 0 : 1;
  }
  const RawDriver& api = s.api;
  metrale_context_t* ctx = s.ctx;
  CUstream rs = s.raw_stream;
  const std::string sync = "synchronous: each op waits for the copy to finish";
  // BENCH_COPY_PARTS (comma list of small, big, sizes, sweep; default all)
  // runs a part alone, for a diagnosis; a full run (bench/run.sh) sets none.
  const char* parts = std::getenv("BENCH_COPY_PARTS");
  auto want = [parts](const char* part) {
    return parts == nullptr || *parts == '\0' || std::strstr(parts, part) != nullptr;
  };
  if (parts != nullptr && *parts != '\0') report.meta("parts", parts);

  // 64 B, and the same with checked pointers.
  std::vector<unsigned char> host(kSmall, 1);
  metrale_devptr_t small = 0;
  metrale_context_t* checked = make_cuda_context(0, 1);
  metrale_devptr_t csmall = 0;
  std::vector<metrale_devptr_t> others;
  if (checked != nullptr) {
    for (size_t i = 0; i < kCheckedLive; ++i) {
      metrale_devptr_t p = 0;
      if (metrale_alloc(checked, 256, &p) == METRALE_OK) others.push_back(p);
    }
    if (!lib_ok(metrale_alloc(checked, kSmall, &csmall), "metrale_alloc (checked)")) csmall = 0;
  }
  if (want("small") && lib_ok(metrale_alloc(ctx, kSmall, &small), "metrale_alloc")) {
    unsigned char* h = host.data();
    const size_t batch = 1000;
    std::vector<Case> h2d = {
        lib("copy_h2d_64B/library", [=] { return metrale_copy_h2d(ctx, h, kSmall, small); },
            "metrale_copy_h2d"),
        raw_async("copy_h2d_64B/raw_async_sync", api, rs,
                  [&api, rs, h, small] { return api.memcpyHtoDAsync(small, h, kSmall, rs); },
                  "cuMemcpyHtoDAsync"),
        {"copy_h2d_64B/raw_legacy_sync", [&api, h, small](size_t n) {
           for (size_t i = 0; i < n; ++i)
             if (!raw_ok(api, api.memcpyHtoD(small, h, kSmall), "cuMemcpyHtoD")) return false;
           return true;
         }, nullptr}};
    std::vector<Case> d2h = {
        lib("copy_d2h_64B/library", [=] { return metrale_copy_d2h(ctx, small, h, kSmall); },
            "metrale_copy_d2h"),
        raw_async("copy_d2h_64B/raw_async_sync", api, rs,
                  [&api, rs, h, small] { return api.memcpyDtoHAsync(h, small, kSmall, rs); },
                  "cuMemcpyDtoHAsync"),
        {"copy_d2h_64B/raw_legacy_sync", [&api, h, small](size_t n) {
           for (size_t i = 0; i < n; ++i)
             if (!raw_ok(api, api.memcpyDtoH(h, small, kSmall), "cuMemcpyDtoH")) return false;
           return true;
         }, nullptr}};
    if (csmall != 0) {
      h2d.push_back(lib("copy_h2d_64B/library_checked",
                        [=] { return metrale_copy_h2d(checked, h, kSmall, csmall); },
                        "metrale_copy_h2d (checked)"));
      d2h.push_back(lib("copy_d2h_64B/library_checked",
                        [=] { return metrale_copy_d2h(checked, csmall, h, kSmall); },
                        "metrale_copy_d2h (checked)"));
    } else {
      report.skip("copy_*_64B/library_checked", "checked-pointer context or its allocation failed");
    }
    add_rows(&report, run_interleaved(h2d, 21, batch), kSmall, batch,
             {"copy_h2d_64B", "raw_async_sync", sync + "; pageable host buffer", ""});
    add_rows(&report, run_interleaved(d2h, 21, batch), kSmall, batch,
             {"copy_d2h_64B", "raw_async_sync", sync + "; pageable host buffer", ""});
    metrale_free(ctx, small);
  }
  for (auto p : others) metrale_free(checked, p);
  if (csmall != 0) metrale_free(checked, csmall);
  metrale_context_destroy(checked);

  // 1 GiB: one device pair and one pinned and one pageable host buffer,
  // shared by both sides so only the call path differs.
  metrale_devptr_t da = 0, db = 0;
  void* pinned = nullptr;
  std::unique_ptr<unsigned char[]> pageable(new (std::nothrow) unsigned char[kBig]);
  if (!lib_ok(metrale_alloc(ctx, kBig, &da), "metrale_alloc 1 GiB") ||
      !lib_ok(metrale_alloc(ctx, kBig, &db), "metrale_alloc 1 GiB") ||
      !lib_ok(metrale_host_alloc_pinned(ctx, kBig, &pinned), "metrale_host_alloc_pinned 1 GiB") ||
      !pageable) {
    report.skip("1 GiB copies", "could not allocate the 1 GiB buffers (device x2, pinned, pageable)");
  } else {
    std::memset(pageable.get(), 3, kBig);  // fault the pages in before timing
    std::memset(pinned, 3, kBig);
    unsigned char* pg = pageable.get();
    unsigned char* pn = static_cast<unsigned char*>(pinned);
    const std::string big = sync + "; GB/s = bytes / median";
    if (want("big")) {
      for (bool h2d : {true, false}) {
        const std::string g = h2d ? "copy_h2d_1GiB_pinned" : "copy_d2h_1GiB_pinned";
        unsigned char* h = pn;
        std::vector<Case> cases = {
            h2d ? lib(g + "/library", [=] { return metrale_copy_h2d(ctx, h, kBig, da); },
                      "metrale_copy_h2d")
                : lib(g + "/library", [=] { return metrale_copy_d2h(ctx, da, h, kBig); },
                      "metrale_copy_d2h"),
            h2d ? raw_async(g + "/raw_async_sync", api, rs,
                            [&api, rs, h, da] { return api.memcpyHtoDAsync(da, h, kBig, rs); },
                            "cuMemcpyHtoDAsync")
                : raw_async(g + "/raw_async_sync", api, rs,
                            [&api, rs, h, da] { return api.memcpyDtoHAsync(h, da, kBig, rs); },
                            "cuMemcpyDtoHAsync")};
        add_rows(&report, run_interleaved(cases, 7, 1, 1), kBig, 1, {g, "raw_async_sync", big, ""});
      }
      std::vector<Case> d2d = {
          lib("copy_d2d_1GiB/library", [=] { return metrale_copy_d2d(ctx, da, db, kBig); }, "metrale_copy_d2d"),
          raw_async("copy_d2d_1GiB/raw_async_sync", api, rs,
                    [&api, rs, da, db] { return api.memcpyDtoDAsync(db, da, kBig, rs); },
                    "cuMemcpyDtoDAsync")};
      add_rows(&report, run_interleaved(d2d, 15, 3), kBig, 3, {"copy_d2d_1GiB", "raw_async_sync", big, ""});
      std::vector<Case> ms = {
          lib("memset_1GiB/library", [=] { return metrale_memset(ctx, da, 0x5a, kBig); }, "metrale_memset"),
          raw_async("memset_1GiB/raw_async_sync", api, rs,
                    [&api, rs, da] { return api.memsetD8Async(da, 0x5a, kBig, rs); }, "cuMemsetD8Async")};
      add_rows(&report, run_interleaved(ms, 15, 3), kBig, 3, {"memset_1GiB", "raw_async_sync", big, ""});
    }
    // Pageable copies: the library (pinned staging on and off) against the
    // raw driver from the same pageable buffer and from the pinned one.
    PageableSetup ps;
    ps.report = &report;
    ps.api = &api;
    ps.raw_stream = rs;
    ps.raw_dev = da;
    ps.pageable = pg;
    ps.pinned = pn;
    ps.big = kBig;
    if (want("big")) pageable_big_rows(ps);
    if (want("sizes")) pageable_size_rows(ps);
    if (want("sweep")) staging_sweep_rows(ps);
  }
  metrale_host_free_pinned(ctx, pinned);
  metrale_free(ctx, da);
  metrale_free(ctx, db);
  return report.write(output_path(argc, argv)) ? 0 : 1;
}
