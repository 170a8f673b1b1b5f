// Timing of batches and the statistics the JSON carries: a figure is the
// per-operation time of a batch, repeated, and reported as median and spread.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

namespace bench {

struct Stats {
  double median = 0, p10 = 0, p90 = 0, min = 0, max = 0;  // ns per operation
  size_t repeats = 0;
};

Stats summarize(std::vector<double> samples);

// Nanoseconds since an arbitrary start (steady_clock).
uint64_t now_ns();

// One measured case: `batch(n)` performs n operations and is timed;
// `after()` (optional) runs untimed after each batch, e.g. to wait for a
// stream so that queued work does not spill into the next sample.
struct Case {
  std::string id;
  std::function<bool(size_t n)> batch;  // false: the case failed (it says why)
  std::function<void()> after;
};

struct CaseResult {
  std::string id;
  Stats stats;
  bool ok = false;
  std::string why;  // when !ok: the failure noted by the batch
};

// A batch that returns false first calls this with the reason.
void note_failure(const std::string& why);

// Runs every case `warmup` times, then `repeats` rounds, each round timing one
// batch of every case in turn, round r starting at case r mod the count
// (BENCH_INTERLEAVE=fixed: always at the first). Interleaving puts the
// library and the raw driver under the same conditions (clocks, caches,
// driver state) in each round rather than one after the other.
std::vector<CaseResult> run_interleaved(const std::vector<Case>& cases, size_t repeats,
                                        size_t batch, size_t warmup = 2);

}  // namespace bench
