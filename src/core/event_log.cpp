#include "core/event_log.hpp"

#include <time.h>
#include <unistd.h>

#include <cstring>

#include "backend/error.hpp"

namespace metrale::core {
namespace {

// Numbers by hand, each appended in one piece: snprintf, or a character at
// a time, costs more than the rest of a line.
void put_u64(std::string& s, uint64_t v) {
  char buf[20];
  char* p = buf + sizeof buf;
  do {
    *--p = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v != 0);
  s.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

// "0x..." with the quotes: 64-bit values pass JavaScript's exact integers.
void put_hex(std::string& s, uint64_t v) {
  static const char digits[] = "0123456789abcdef";
  char buf[20];
  char* p = buf + sizeof buf;
  *--p = '"';
  do {
    *--p = digits[v & 0xf];
    v >>= 4;
  } while (v != 0);
  *--p = 'x';
  *--p = '0';
  *--p = '"';
  s.append(p, static_cast<size_t>(buf + sizeof buf - p));
}

// Length of the valid UTF-8 sequence at p (0: not valid), so file names in
// any encoding still make a line every JSON reader accepts.
size_t utf8_len(const unsigned char* p, size_t left) {
  const unsigned char c = p[0];
  size_t n = c >= 0xf0 && c <= 0xf4 ? 4 : c >= 0xe0 ? 3 : c >= 0xc2 && c < 0xe0 ? 2 : 0;
  if (n == 0 || n > left) return 0;
  for (size_t i = 1; i < n; ++i) {
    if ((p[i] & 0xc0) != 0x80) return 0;
  }
  if (n == 3 && c == 0xe0 && p[1] < 0xa0) return 0;  // overlong
  if (n == 3 && c == 0xed && p[1] >= 0xa0) return 0;  // surrogate
  if (n == 4 && c == 0xf0 && p[1] < 0x90) return 0;  // overlong
  if (n == 4 && c == 0xf4 && p[1] >= 0x90) return 0;  // past U+10FFFF
  return n;
}

// The inside of a JSON string: quotes, backslashes and control characters
// escaped; bytes that are not UTF-8 become U+FFFD.
void put_escaped(std::string& s, const char* text) {
  const auto* p = reinterpret_cast<const unsigned char*>(text);
  const auto* end = p + std::strlen(text);
  while (p < end) {
    // A run of plain ASCII goes in one append.
    const unsigned char* run = p;
    while (p < end && *p >= 0x20 && *p < 0x7f && *p != '"' && *p != '\\') ++p;
    if (p > run) s.append(reinterpret_cast<const char*>(run), static_cast<size_t>(p - run));
    if (p == end) break;
    const unsigned char c = *p;
    if (c == '"' || c == '\\') {
      s += '\\';
      s += static_cast<char>(c);
    } else if (c < 0x20 || c == 0x7f) {
      static const char digits[] = "0123456789abcdef";
      s += "\\u00";
      s += digits[c >> 4];
      s += digits[c & 0xf];
    } else {
      const size_t n = utf8_len(p, static_cast<size_t>(end - p));
      if (n == 0) {
        s += "\\ufffd";
      } else {
        s.append(reinterpret_cast<const char*>(p), n);
        p += n;
        continue;
      }
    }
    ++p;
  }
}

void put_str(std::string& s, const char* text) {
  if (text == nullptr) {
    s += "null";
    return;
  }
  s += '"';
  put_escaped(s, text);
  s += '"';
}

// "file:line" as one JSON string (null without a file).
void put_site(std::string& s, const char* file, int line) {
  if (file == nullptr) {
    s += "null";
    return;
  }
  s += '"';
  put_escaped(s, file);
  s += ':';
  if (line < 0) {
    s += '-';
    put_u64(s, static_cast<uint64_t>(-static_cast<int64_t>(line)));
  } else {
    put_u64(s, static_cast<uint64_t>(line));
  }
  s += '"';
}

void put_pool(std::string& s, const EventPoolState& p) {
  if (!p.enabled) {
    s += ",\"pool\":null";
    return;
  }
  s += ",\"pool\":{\"reserved\":";
  put_u64(s, p.reserved);
  s += ",\"in_use\":";
  put_u64(s, p.in_use);
  s += ",\"cached\":";
  put_u64(s, p.cached);
  s += '}';
}

// The common head of every line: {"ev":..,"seq":..,"t_ns":..,"ctx":..
void put_head(std::string& s, const char* ev, uint64_t seq, uint64_t t_ns, uint64_t ctx) {
  s += "{\"ev\":\"";
  s += ev;
  s += "\",\"seq\":";
  put_u64(s, seq);
  s += ",\"t_ns\":";
  put_u64(s, t_ns);
  s += ",\"ctx\":";
  put_hex(s, ctx);
}

// One buffer per thread: no allocation per line once it has grown.
std::string& line_buffer() {
  thread_local std::string buf;
  buf.clear();
  return buf;
}

}  // namespace

uint64_t event_clock_ns() noexcept {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void EventLog::open(const std::string& path, const EventLogHeader& h) {
  std::lock_guard<std::mutex> lock(admin_mu_);
  if (std::atomic_load(&sink_)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "an event log is already open on this context ('" + std::atomic_load(&sink_)->path() +
             "'); close it first");
  }
  attach_locked(EventSink::open(path), h);  // EventSink::open throws when it cannot
}

void EventLog::attach(std::shared_ptr<EventSink> sink, const EventLogHeader& h) noexcept {
  std::lock_guard<std::mutex> lock(admin_mu_);
  attach_locked(std::move(sink), h);
}

void EventLog::attach_locked(std::shared_ptr<EventSink> sink, const EventLogHeader& h) noexcept {
  if (!sink || std::atomic_load(&sink_)) return;
  ctx_ = h.ctx;
  try {
    std::string s;
    put_head(s, "open", seq_.fetch_add(1, std::memory_order_relaxed), event_clock_ns(), h.ctx);
    s += ",\"v\":1,\"backend\":";
    put_str(s, h.backend);
    s += ",\"device\":";
    s += std::to_string(h.device);
    s += ",\"pool\":";
    s += h.pool ? "true" : "false";
    s += ",\"redzone\":";
    put_u64(s, h.redzone);
    s += ",\"pid\":";
    put_u64(s, static_cast<uint64_t>(::getpid()));
    s += "}\n";
    sink->append(s.data(), s.size());
  } catch (...) {
    // No memory for the header: the events still follow.
  }
  std::atomic_store(&sink_, std::move(sink));
  on_.store(true, std::memory_order_release);
}

void EventLog::close() {
  std::lock_guard<std::mutex> lock(admin_mu_);
  std::shared_ptr<EventSink> sink = std::atomic_load(&sink_);
  if (!sink) return;
  on_.store(false, std::memory_order_release);
  std::string s;
  put_head(s, "close", seq_.fetch_add(1, std::memory_order_relaxed), event_clock_ns(), ctx_);
  s += "}\n";
  sink->append(s.data(), s.size());
  const bool ok = sink->flush();
  const uint64_t lost = sink->lost();
  const std::string path = sink->path();
  std::atomic_store(&sink_, std::shared_ptr<EventSink>());
  // A line being written by another thread right now still holds its own
  // reference: the sink closes after that line, never under it.
  sink.reset();
  if (!ok) {
    fail(METRALE_ERROR_INTERNAL, "event log '" + path + "': " + std::to_string(lost) +
                                     " lines could not be written (write error; log closed)");
  }
}

void EventLog::flush() {
  std::lock_guard<std::mutex> lock(admin_mu_);
  std::shared_ptr<EventSink> sink = std::atomic_load(&sink_);
  if (!sink) return;
  if (!sink->flush()) {
    fail(METRALE_ERROR_INTERNAL, "event log '" + sink->path() + "': " +
                                     std::to_string(sink->lost()) +
                                     " lines could not be written (write error)");
  }
}

EventLog::Ticket EventLog::take_ticket() noexcept {
  Ticket t;
  t.seq = seq_.fetch_add(1, std::memory_order_relaxed);
  t.t_ns = event_clock_ns();
  return t;
}

void EventLog::emit(const std::string& line) noexcept {
  std::shared_ptr<EventSink> sink = std::atomic_load(&sink_);
  if (sink) sink->append(line.data(), line.size());
}

void EventLog::mem_line(const char* ev, Ticket t, const EventMem& m,
                        const EventPoolState& pool) noexcept {
  try {
    std::string& s = line_buffer();
    put_head(s, ev, t.seq, t.t_ns, ctx_);
    s += ",\"stream\":";
    put_hex(s, m.stream);
    s += ",\"bytes\":";
    put_u64(s, m.bytes);
    s += ",\"ptr\":";
    if (std::strcmp(ev, "oom") == 0) {
      s += "null";
    } else {
      put_hex(s, m.ptr);
    }
    s += ",\"kind\":\"";
    s += m.kind == METRALE_ALLOC_MANAGED ? "managed" : "device";
    s += "\",\"site\":";
    put_site(s, m.file, m.line);
    // Per-allocation tags are not on the ledger yet: always null for now.
    s += ",\"tag\":null";
    if (std::strcmp(ev, "free") == 0) {
      s += ",\"free_site\":";
      put_site(s, m.free_file, m.free_line);
      s += ",\"sweep\":";
      s += m.sweep ? "true" : "false";
    }
    put_pool(s, pool);
    s += "}\n";
    emit(s);
  } catch (...) {
    // Out of host memory while formatting: the line is dropped.
  }
}

void EventLog::alloc(const EventMem& m, const EventPoolState& pool) noexcept {
  mem_line("alloc", take_ticket(), m, pool);
}

void EventLog::free(Ticket t, const EventMem& m, const EventPoolState& pool) noexcept {
  // A log opened between the ticket and now: the free still gets a number.
  if (t.seq == 0 && t.t_ns == 0) t = take_ticket();
  mem_line("free", t, m, pool);
}

void EventLog::oom(const EventMem& m, const EventPoolState& pool) noexcept {
  mem_line("oom", take_ticket(), m, pool);
}

void EventLog::scan(const char* which, size_t violations,
                    const std::vector<EventScanFinding>& findings,
                    const EventPoolState& pool) noexcept {
  try {
    std::string& s = line_buffer();
    const Ticket t = take_ticket();
    put_head(s, "scan", t.seq, t.t_ns, ctx_);
    s += ",\"scan\":";
    put_str(s, which);
    s += ",\"violations\":";
    put_u64(s, violations);
    s += ",\"found\":[";
    for (size_t i = 0; i < findings.size() && i < kMaxScanFindings; ++i) {
      const EventScanFinding& f = findings[i];
      if (i > 0) s += ',';
      s += "{\"ptr\":";
      put_hex(s, f.ptr);
      s += ",\"bytes\":";
      put_u64(s, f.bytes);
      s += ",\"site\":";
      put_site(s, f.file, f.line);
      s += ",\"first_bad_offset\":";
      put_u64(s, f.first_bad_offset);
      s += '}';
    }
    s += ']';
    put_pool(s, pool);
    s += "}\n";
    emit(s);
  } catch (...) {
    // Out of host memory while formatting: the line is dropped.
  }
}

}  // namespace metrale::core
