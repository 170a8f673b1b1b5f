#include "bench_json.hpp"

#include <cmath>
#include <cstdlib>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>

namespace bench {

std::string json_string(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);
        }
    }
  }
  return out + "\"";
}

namespace {
std::string number(double v) {
  if (!std::isfinite(v)) return "null";
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.6g", v);
  return buf;
}

const char* target_kind(Target::Kind k) {
  switch (k) {
    case Target::RATIO: return "ratio";
    case Target::DIFF_NS: return "diff_ns";
    case Target::ABS_NS: return "abs_ns";
    default: return "none";
  }
}

void write_entry(std::ostream& o, const Entry& e) {
  o << "    {\"id\": " << json_string(e.id) << ", \"group\": " << json_string(e.group)
    << ", \"variant\": " << json_string(e.variant) << ", \"side\": " << json_string(e.side);
  if (e.size_bytes >= 0) o << ", \"size_bytes\": " << number(e.size_bytes);
  o << ", \"unit\": " << json_string(e.unit) << ", \"median\": " << number(e.stats.median)
    << ", \"p10\": " << number(e.stats.p10) << ", \"p90\": " << number(e.stats.p90)
    << ", \"min\": " << number(e.stats.min) << ", \"max\": " << number(e.stats.max)
    << ", \"repeats\": " << e.stats.repeats << ", \"batch\": " << e.batch;
  if (!e.timing.empty()) o << ", \"timing\": " << json_string(e.timing);
  if (!e.raw_ref.empty()) o << ", \"raw_ref\": " << json_string(e.raw_ref);
  if (e.target.kind != Target::NONE)
    o << ", \"target\": {\"kind\": \"" << target_kind(e.target.kind)
      << "\", \"max\": " << number(e.target.max) << "}";
  if (!e.note.empty()) o << ", \"note\": " << json_string(e.note);
  o << "}";
}
}  // namespace

void Report::meta(const std::string& key, const std::string& value) {
  meta_.emplace_back(key, json_string(value));
}

void Report::meta_number(const std::string& key, double value) {
  meta_.emplace_back(key, number(value));
}

void Report::skip(const std::string& what, const std::string& why) {
  std::fprintf(stderr, "%s: skipped %s: %s\n", program_.c_str(), what.c_str(), why.c_str());
  skipped_.emplace_back(what, why);
}

bool Report::has(const std::string& id) const {
  for (const auto& e : entries_)
    if (e.id == id) return true;
  return false;
}

bool Report::write(const std::string& path) const {
  std::ostringstream o;
  o << "{\n  \"program\": " << json_string(program_) << ",\n  \"meta\": {";
  for (size_t i = 0; i < meta_.size(); ++i)
    o << (i ? ", " : "") << json_string(meta_[i].first) << ": " << meta_[i].second;
  o << "},\n  \"results\": [\n";
  for (size_t i = 0; i < entries_.size(); ++i) {
    write_entry(o, entries_[i]);
    o << (i + 1 < entries_.size() ? ",\n" : "\n");
  }
  o << "  ],\n  \"skipped\": [\n";
  for (size_t i = 0; i < skipped_.size(); ++i)
    o << "    {\"what\": " << json_string(skipped_[i].first)
      << ", \"why\": " << json_string(skipped_[i].second) << "}"
      << (i + 1 < skipped_.size() ? ",\n" : "\n");
  o << "  ]\n}\n";
  if (path == "-") {
    std::cout << o.str();
    return true;
  }
  std::ofstream f(path);
  f << o.str();
  f.close();
  if (!f) {
    std::fprintf(stderr, "%s: cannot write %s\n", program_.c_str(), path.c_str());
    return false;
  }
  return true;
}

void add_case(Report* report, const CaseResult& r, Entry e) {
  e.id = r.id;
  if (!r.ok) {
    report->skip(r.id, r.why);
    return;
  }
  e.stats = r.stats;
  report->add(std::move(e));
}

const CaseResult* find_case(const std::vector<CaseResult>& results, const std::string& id) {
  for (const auto& r : results)
    if (r.id == id) return &r;
  return nullptr;
}

std::string output_path(int argc, char** argv) {
  if (argc <= 1) return "-";
  const std::string path = argv[1];
  if (path.size() > 1 && path[0] == '-') {
    // A flag (--help) is not a file to write the results to.
    std::cerr << argv[0] << ": takes one argument, the JSON output path (- or none: stdout), not "
              << path << "\n";
    std::exit(2);
  }
  return path;
}

}  // namespace bench
