// Reads an event log (docs/event-log.md) into events, checking each line's
// fields; a malformed line is an error naming its line number.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace metrale_replay {

struct LogEvent {
  enum Kind { Open, Alloc, Free, Oom, Scan, Close } kind = Alloc;
  size_t line_no = 0;
  uint64_t seq = 0;
  uint64_t t_ns = 0;
  uint64_t ctx = 0;
  uint64_t stream = 0;
  uint64_t bytes = 0;
  uint64_t ptr = 0;
  bool managed = false;
  std::string site;       // "file:line" ("" when null)
  std::string free_site;  // frees
  bool sweep = false;
  bool pool_known = false;  // the line had pool figures
  uint64_t pool_reserved = 0;
  // Open lines: how the logged context was set up.
  std::string backend;
  bool pool_on = false;
  uint64_t redzone = 0;
  // Scan lines.
  uint64_t violations = 0;
};

// Reads path: every line parsed, then sorted by (ctx, seq) (lines of
// different threads may be written out of seq order). Lines with an "ev"
// this reader does not know are skipped (later versions may add some).
// false with *error ("path:LINE: what") on the first bad line or I/O error.
bool read_event_log(const std::string& path, std::vector<LogEvent>* out, std::string* error);

// "0x1f" -> 31; false when text is not a "0x" hex number of at most 64 bits.
bool parse_hex(const std::string& text, uint64_t* out);

}  // namespace metrale_replay
