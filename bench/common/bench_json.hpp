// The JSON fragment each bench program writes. bench/report.py merges the
// fragments of one run, adds the run's metadata (date, git commit), computes
// library/raw ratios and writes the markdown table.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "bench_stats.hpp"

namespace bench {

// What a figure is held against. Nothing asserts it: the report marks it
// met or missed.
struct Target {
  enum Kind { NONE, RATIO, DIFF_NS, ABS_NS } kind = NONE;
  double max = 0;
};

struct Entry {
  std::string id;          // unique in the run, e.g. "alloc_free/256B/library_ledger"
  std::string group;       // what is measured, e.g. "alloc_free"
  std::string variant;     // e.g. "library_ledger", "raw_cuMemAlloc"
  std::string side;        // "library", "raw" or "anchor"
  double size_bytes = -1;  // -1: not a size-dependent figure
  Stats stats;
  size_t batch = 0;
  std::string unit = "ns/op";
  std::string timing;      // what the timed region includes (sync or not)
  std::string raw_ref;     // id of the raw figure this one is compared with
  Target target;
  std::string note;
};

class Report {
 public:
  explicit Report(std::string program) : program_(std::move(program)) {}
  void meta(const std::string& key, const std::string& value);
  void meta_number(const std::string& key, double value);
  void add(Entry e) { entries_.push_back(std::move(e)); }
  // A part that could not run, and why (no crash, no silent gap).
  void skip(const std::string& what, const std::string& why);
  bool has(const std::string& id) const;
  // Writes the fragment to `path` ("-" for stdout). False with a message on
  // stderr when the file cannot be written.
  bool write(const std::string& path) const;

 private:
  std::string program_;
  std::vector<std::pair<std::string, std::string>> meta_;  // key, JSON value
  std::vector<Entry> entries_;
  std::vector<std::pair<std::string, std::string>> skipped_;
};

std::string json_string(const std::string& s);

// Adds `e` with the case's statistics (e.id taken from the case), or a
// skipped entry with the case's failure.
void add_case(Report* report, const CaseResult& r, Entry e);

// The result of case `id` in `results`; nullptr when absent.
const CaseResult* find_case(const std::vector<CaseResult>& results, const std::string& id);

// The fragment path: argv[1] when given, else "-". A flag ("--help") is
// refused with a usage line and exit status 2.
std::string output_path(int argc, char** argv);

}  // namespace bench
