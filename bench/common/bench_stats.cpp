#include "bench_stats.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>

namespace bench {

namespace {
std::string g_last_failure;

// Nearest-rank percentile on sorted samples.
double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  double rank = p * static_cast<double>(sorted.size() - 1);
  size_t lo = static_cast<size_t>(std::floor(rank));
  size_t hi = std::min(lo + 1, sorted.size() - 1);
  double frac = rank - static_cast<double>(lo);
  return sorted[lo] * (1 - frac) + sorted[hi] * frac;
}
}  // namespace

Stats summarize(std::vector<double> samples) {
  Stats s;
  if (samples.empty()) return s;
  std::sort(samples.begin(), samples.end());
  s.repeats = samples.size();
  s.min = samples.front();
  s.max = samples.back();
  s.median = percentile(samples, 0.5);
  s.p10 = percentile(samples, 0.1);
  s.p90 = percentile(samples, 0.9);
  return s;
}

void note_failure(const std::string& why) { g_last_failure = why; }

uint64_t now_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

std::vector<CaseResult> run_interleaved(const std::vector<Case>& cases, size_t repeats,
                                        size_t batch, size_t warmup) {
  std::vector<CaseResult> out(cases.size());
  std::vector<std::vector<double>> samples(cases.size());
  for (size_t i = 0; i < cases.size(); ++i) {
    out[i].id = cases[i].id;
    out[i].ok = true;
  }
  // Each round starts one case later than the last, so no case always runs
  // right after the same other one (BENCH_INTERLEAVE=fixed: always in the
  // order given, as runs before r19 did).
  const char* order = std::getenv("BENCH_INTERLEAVE");
  const bool rotate = order == nullptr || std::string(order) != "fixed";
  for (size_t round = 0; round < warmup + repeats; ++round) {
    for (size_t k = 0; k < cases.size(); ++k) {
      const size_t i = rotate ? (round + k) % cases.size() : k;
      if (!out[i].ok) continue;
      uint64_t t0 = now_ns();
      bool ok = cases[i].batch(batch);
      uint64_t t1 = now_ns();
      if (cases[i].after) cases[i].after();
      if (!ok) {
        out[i].ok = false;
        out[i].why = g_last_failure.empty() ? "the batch failed" : g_last_failure;
        g_last_failure.clear();
        continue;
      }
      if (round >= warmup)
        samples[i].push_back(static_cast<double>(t1 - t0) / static_cast<double>(batch));
    }
  }
  for (size_t i = 0; i < cases.size(); ++i) out[i].stats = summarize(samples[i]);
  return out;
}

}  // namespace bench
