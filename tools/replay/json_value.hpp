// A small JSON reader for event-log lines: objects, arrays, strings (with
// \u escapes), integers kept exact up to 2^64-1, other numbers as double,
// true, false, null. Enough for docs/event-log.md's format; not a general
// library (no streaming, whole line in memory).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

namespace metrale_replay {

struct Json {
  enum Kind { Null, Bool, Int, Real, String, Array, Object } kind = Null;
  bool b = false;
  uint64_t i = 0;  // Int: non-negative integers
  double d = 0;    // Real (and Int, converted)
  std::string s;
  std::vector<Json> items;
  std::map<std::string, Json> fields;

  // The member `key` of an object; nullptr when absent or not an object.
  const Json* get(const std::string& key) const;
};

// Parses one line. Returns false with *error set ("at column N: ...").
bool parse_json(const std::string& text, Json* out, std::string* error);

}  // namespace metrale_replay
