// Pageable copies through the library's pinned staging (see copy_staging.hpp).
// Every library variant has its own context (staging options are per
// context) and its own device buffer; each figure is one synchronous copy
// (metrale_copy_h2d / metrale_copy_d2h, which wait for the copy), like the
// raw rows (async copy + cuStreamSynchronize).
#include "copy_staging.hpp"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "bench_stats.hpp"
#include "gpu_session.hpp"

namespace bench {

namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

// Goals of issue 10 for 1 GiB pageable copies: H2D >= 50 GB/s, D2H >= 44 GB/s.
constexpr double kH2dGoalGBps = 50.0, kD2hGoalGBps = 44.0;

// A library context with the given staging options and `bytes` of device memory.
struct LibSide {
  metrale_context_t* ctx = nullptr;
  metrale_devptr_t dev = 0;
  LibSide(metrale_backend_t backend, size_t bytes, size_t threshold, size_t buffer,
          uint32_t buffers, uint32_t threads) {
    metrale_context_options_t o;
    metrale_context_options_init(&o);
    o.backend = backend;
    o.staging_threshold = threshold;
    o.staging_buffer_bytes = buffer;
    o.staging_buffers = buffers;
    o.staging_threads = threads;
    if (!lib_ok(metrale_context_create(&o, &ctx), "metrale_context_create (staging)")) return;
    if (!lib_ok(metrale_alloc(ctx, bytes, &dev), "metrale_alloc (staging bench)")) dev = 0;
  }
  ~LibSide() {
    if (dev != 0) metrale_free(ctx, dev);
    metrale_context_destroy(ctx);
  }
  bool ok() const { return dev != 0; }
};

std::unique_ptr<LibSide> defaults_side(metrale_backend_t b, size_t bytes) {
  return std::make_unique<LibSide>(b, bytes, METRALE_STAGING_DEFAULT_THRESHOLD,
                                   METRALE_STAGING_DEFAULT_BUFFER_BYTES,
                                   METRALE_STAGING_DEFAULT_BUFFERS,
                                   METRALE_STAGING_DEFAULT_THREADS);
}
std::unique_ptr<LibSide> unstaged_side(metrale_backend_t b, size_t bytes) {
  return std::make_unique<LibSide>(b, bytes, 0, METRALE_STAGING_DEFAULT_BUFFER_BYTES,
                                   METRALE_STAGING_DEFAULT_BUFFERS,
                                   METRALE_STAGING_DEFAULT_THREADS);
}

// Environment variables override the options: a sweep would measure them.
const char* staging_env_set() {
  for (const char* v : {"METRALE_STAGING_THRESHOLD", "METRALE_STAGING_BUFFER",
                        "METRALE_STAGING_BUFFERS", "METRALE_STAGING_THREADS",
                        "METRALE_STAGING_STORES"}) {
    const char* x = std::getenv(v);
    if (x != nullptr && *x != '\0') return v;
  }
  return nullptr;
}

Case lib_copy(const std::string& id, const LibSide* side, bool h2d, unsigned char* host,
              size_t bytes) {
  return {id, [side, h2d, host, bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              metrale_status_t st = h2d ? metrale_copy_h2d(side->ctx, host, bytes, side->dev)
                                        : metrale_copy_d2h(side->ctx, side->dev, host, bytes);
              if (!lib_ok(st, h2d ? "metrale_copy_h2d" : "metrale_copy_d2h")) return false;
            }
            return true;
          }, nullptr};
}

Case raw_copy(const std::string& id, const PageableSetup& s, bool h2d, unsigned char* host,
              size_t bytes) {
  const RawDriver* api = s.api;
  CUstream rs = s.raw_stream;
  CUdeviceptr d = s.raw_dev;
  return {id, [api, rs, d, h2d, host, bytes](size_t n) {
            for (size_t i = 0; i < n; ++i) {
              CUresult rc = h2d ? api->memcpyHtoDAsync(d, host, bytes, rs)
                                : api->memcpyDtoHAsync(host, d, bytes, rs);
              if (!raw_ok(*api, rc, h2d ? "cuMemcpyHtoDAsync" : "cuMemcpyDtoHAsync")) return false;
              if (!raw_ok(*api, api->streamSynchronize(rs), "cuStreamSynchronize")) return false;
            }
            return true;
          }, nullptr};
}

std::string group_of(bool h2d, size_t bytes) {
  return std::string(h2d ? "copy_h2d_" : "copy_d2h_") + size_label(bytes) + "_pageable";
}

std::string defaults_text() {
  return "defaults: threshold " + size_label(METRALE_STAGING_DEFAULT_THRESHOLD) + ", " +
         std::to_string(METRALE_STAGING_DEFAULT_BUFFERS) + " x " +
         size_label(METRALE_STAGING_DEFAULT_BUFFER_BYTES) + " buffers, " +
         std::to_string(METRALE_STAGING_DEFAULT_THREADS) + " threads";
}

const char* kTiming = "synchronous: each op waits for the copy to finish; GB/s = bytes / median";

// Adds the rows of one group. Library variants compare with raw_async_sync
// (the pageable driver copy); `goal_gbps` > 0 sets an absolute target.
void add_group(Report* report, const std::vector<CaseResult>& results, const std::string& group,
               size_t bytes, size_t batch, double goal_gbps,
               const std::function<std::string(const std::string&)>& note_of) {
  for (const auto& r : results) {
    Entry e;
    e.group = group;
    e.variant = r.id.substr(group.size() + 1);
    e.size_bytes = static_cast<double>(bytes);
    e.batch = batch;
    e.timing = kTiming;
    if (e.variant.rfind("library", 0) == 0) {
      e.side = "library";
      e.raw_ref = group + "/raw_async_sync";
      if (goal_gbps > 0) e.target = {Target::ABS_NS, static_cast<double>(bytes) / goal_gbps};
    } else {
      e.side = "raw";
    }
    e.note = note_of(e.variant);
    add_case(report, r, e);
  }
}

std::string variant_note(const std::string& v) {
  if (v == "library") return "staging on, " + defaults_text();
  if (v == "library_unstaged") return "staging off (threshold 0): the direct pageable copy";
  if (v == "library_staged") return "staging on at every size (threshold 4 KiB), default ring";
  if (v == "raw_pinned_async_sync") return "raw copy from/to a pinned buffer: the ceiling";
  if (v == "raw_async_sync") return "raw copy from/to the same pageable buffer";
  return "";
}

// A comma list of numbers from the environment variable `var`, or `fallback`
// when it is unset, empty or not such a list.
template <class T>
std::vector<T> sweep_list(const char* var, std::vector<T> fallback) {
  const char* v = std::getenv(var);
  if (v == nullptr || *v == '\0') return fallback;
  std::vector<T> out;
  for (const char* p = v; *p != '\0';) {
    char* end = nullptr;
    const unsigned long long x = std::strtoull(p, &end, 10);
    if (end == p || x == 0) return fallback;
    out.push_back(static_cast<T>(x));
    p = *end == ',' ? end + 1 : end;
    if (*end != ',' && *end != '\0') return fallback;
  }
  return out;
}

}  // namespace

void pageable_big_rows(const PageableSetup& s) {
  auto on = defaults_side(s.backend, s.big);
  auto off = unstaged_side(s.backend, s.big);
  if (!on->ok() || !off->ok()) {
    s.report->skip(group_of(true, s.big) + "/library*", "could not make the library contexts");
    return;
  }
  const char* env = staging_env_set();
  for (bool h2d : {true, false}) {
    const std::string g = group_of(h2d, s.big);
    std::vector<Case> cases = {lib_copy(g + "/library", on.get(), h2d, s.pageable, s.big),
                               lib_copy(g + "/library_unstaged", off.get(), h2d, s.pageable, s.big)};
    if (s.api != nullptr) {
      cases.push_back(raw_copy(g + "/raw_async_sync", s, h2d, s.pageable, s.big));
      if (s.pinned != nullptr)
        cases.push_back(raw_copy(g + "/raw_pinned_async_sync", s, h2d, s.pinned, s.big));
    }
    const double goal = s.big == (size_t{1} << 30) ? (h2d ? kH2dGoalGBps : kD2hGoalGBps) : 0;
    add_group(s.report, run_interleaved(cases, 7, 1, 1), g, s.big, 1, goal,
              [env](const std::string& v) {
                std::string n = variant_note(v);
                if (env != nullptr && v.rfind("library", 0) == 0)
                  n += std::string("; NOTE: ") + env + " is set and overrides the options";
                return n;
              });
  }
}

void pageable_size_rows(const PageableSetup& s) {
  const size_t sizes[] = {64 * KiB, 256 * KiB, 512 * KiB, 1 * MiB,  2 * MiB,  4 * MiB,
                          8 * MiB,  16 * MiB,  32 * MiB,  64 * MiB, 256 * MiB};
  const size_t most = std::min<size_t>(256 * MiB, s.big);
  auto on = defaults_side(s.backend, most);
  auto off = unstaged_side(s.backend, most);
  auto all = std::make_unique<LibSide>(s.backend, most, 4096, METRALE_STAGING_DEFAULT_BUFFER_BYTES,
                                       METRALE_STAGING_DEFAULT_BUFFERS,
                                       METRALE_STAGING_DEFAULT_THREADS);
  if (!on->ok() || !off->ok() || !all->ok()) {
    s.report->skip("copy_*_pageable sizes", "could not make the library contexts");
    return;
  }
  for (bool h2d : {true, false}) {
    for (size_t bytes : sizes) {
      if (bytes > most) break;
      const std::string g = group_of(h2d, bytes);
      std::vector<Case> cases = {lib_copy(g + "/library", on.get(), h2d, s.pageable, bytes),
                                 lib_copy(g + "/library_unstaged", off.get(), h2d, s.pageable, bytes),
                                 lib_copy(g + "/library_staged", all.get(), h2d, s.pageable, bytes)};
      if (s.api != nullptr) cases.push_back(raw_copy(g + "/raw_async_sync", s, h2d, s.pageable, bytes));
      // About 8 MiB per batch, at least one copy.
      const size_t batch = bytes >= 8 * MiB ? 1 : (8 * MiB) / bytes;
      add_group(s.report, run_interleaved(cases, 11, batch, 2), g, bytes, batch, 0, variant_note);
    }
  }
}

void staging_sweep_rows(const PageableSetup& s) {
  if (const char* env = staging_env_set()) {
    s.report->skip("copy_*_pageable/library_b*", std::string(env) +
                                                    " is set: it would override every setting of the sweep");
    return;
  }
  const bool gpu = s.api != nullptr;
  // BENCH_SWEEP_COUNTS, BENCH_SWEEP_BUFFERS (bytes), BENCH_SWEEP_THREADS and
  // BENCH_SWEEP_STORES (comma lists) replace a dimension's values, for a
  // diagnosis; a full run (bench/run.sh) sets none.
  const std::vector<uint32_t> counts = sweep_list<uint32_t>(
      "BENCH_SWEEP_COUNTS", gpu ? std::vector<uint32_t>{4, 8} : std::vector<uint32_t>{2});
  const std::vector<size_t> buffers = sweep_list<size_t>(
      "BENCH_SWEEP_BUFFERS",
      gpu ? std::vector<size_t>{4 * MiB, 8 * MiB, 16 * MiB} : std::vector<size_t>{2 * MiB, 8 * MiB});
  const std::vector<uint32_t> threads = sweep_list<uint32_t>(
      "BENCH_SWEEP_THREADS", gpu ? std::vector<uint32_t>{8, 12, 16} : std::vector<uint32_t>{1, 2});
  std::vector<std::string> store_modes = {"streaming", "cached"};
  if (const char* v = std::getenv("BENCH_SWEEP_STORES"); v != nullptr && *v != '\0') {
    store_modes.clear();
    std::string list = v;
    for (size_t at = 0; at <= list.size();) {
      const size_t comma = std::min(list.find(',', at), list.size());
      if (comma > at) store_modes.push_back(list.substr(at, comma - at));
      at = comma + 1;
    }
  }
  // Every setting's context exists at once and the rounds interleave them,
  // so that drift on the machine (other tenants, clocks) spreads over all
  // settings instead of favouring the ones measured in a quiet minute.
  struct Setting {
    std::string variant, note;
    std::unique_ptr<LibSide> side;
  };
  std::vector<Setting> settings;
  for (const std::string& stores : store_modes) {
    // METRALE_STAGING_STORES is read at context create.
    setenv("METRALE_STAGING_STORES", stores.c_str(), 1);
    for (uint32_t count : counts) {
      for (size_t buf : buffers) {
        for (uint32_t t : threads) {
          Setting st;
          st.variant = "library_b" + std::to_string(count) + "_" + size_label(buf) + "_t" +
                       std::to_string(t) + "_" + stores;
          st.note = "staging sweep: " + std::to_string(count) + " buffers of " + size_label(buf) +
                    ", " + std::to_string(t) + " threads, " + stores + " stores";
          st.side = std::make_unique<LibSide>(s.backend, s.big, METRALE_STAGING_DEFAULT_THRESHOLD,
                                              buf, count, t);
          if (!st.side->ok()) {
            s.report->skip("copy_*_pageable/" + st.variant, "could not make the library context");
            continue;
          }
          settings.push_back(std::move(st));
        }
      }
    }
  }
  unsetenv("METRALE_STAGING_STORES");
  for (bool h2d : {true, false}) {
    const std::string g = group_of(h2d, s.big);
    std::vector<Case> cases;
    for (const Setting& st : settings)
      cases.push_back(lib_copy(g + "/" + st.variant, st.side.get(), h2d, s.pageable, s.big));
    add_group(s.report, run_interleaved(cases, 7, 1, 1), g, s.big, 1, 0,
              [&settings](const std::string& v) {
                for (const Setting& st : settings)
                  if (st.variant == v) return st.note;
                return std::string();
              });
  }
}

void host_pageable_rows(Report* report) {
  PageableSetup s;
  s.report = report;
  s.backend = METRALE_BACKEND_HOST;
  s.big = 64 * MiB;
  std::unique_ptr<unsigned char[]> pageable(new (std::nothrow) unsigned char[s.big]);
  if (!pageable) {
    report->skip("host pageable rows", "could not allocate 64 MiB");
    return;
  }
  std::memset(pageable.get(), 3, s.big);
  s.pageable = pageable.get();
  report->meta("host_pageable_rows",
               "no GPU: the staging rows ran on the host backend (memcpy only, 64 MiB instead of "
               "1 GiB, no raw rows); a check that the bench runs, not a GPU figure");
  pageable_big_rows(s);
  pageable_size_rows(s);
  staging_sweep_rows(s);
}

}  // namespace bench
