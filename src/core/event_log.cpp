#include "core/event_log.hpp"

#include <time.h>
#include <unistd.h>

#include <cstring>

#include "backend/error.hpp"
#include "core/event_json.hpp"

namespace metrale::core {
namespace {

namespace js = event_json;

// Bytes of a line besides its strings: head, numbers, field names, pool.
constexpr size_t kLineFixed = 512;

// A line's bytes: on the stack when its bound fits (nearly every line), else
// on the heap for that line alone, so no line allocates in the common case.
// Not a thread_local buffer: a thread's last calls may come from a pthread
// key destructor, which runs after its C++ thread_local objects were
// destroyed (such a buffer was then freed twice, or written after its
// free). Throws bad_alloc (the caller drops the line).
class LineBuffer {
 public:
  explicit LineBuffer(size_t bytes)
      : heap_(bytes > sizeof stack_ ? new char[bytes] : nullptr),
        data_(heap_ ? heap_.get() : stack_) {}
  LineBuffer(const LineBuffer&) = delete;
  LineBuffer& operator=(const LineBuffer&) = delete;
  char* data() const { return data_; }

 private:
  char stack_[4096];
  std::unique_ptr<char[]> heap_;
  char* data_;
};

void put_pool(char*& p, const EventPoolState& pool) {
  if (!pool.enabled) {
    js::lit(p, ",\"pool\":null");
    return;
  }
  js::lit(p, ",\"pool\":{\"reserved\":");
  js::u64(p, pool.reserved);
  js::lit(p, ",\"in_use\":");
  js::u64(p, pool.in_use);
  js::lit(p, ",\"cached\":");
  js::u64(p, pool.cached);
  *p++ = '}';
}

// The common head of every line: {"ev":..,"seq":..,"t_ns":..,"ctx":..
void put_head(char*& p, const char* ev, uint64_t seq, uint64_t t_ns, uint64_t ctx) {
  js::lit(p, "{\"ev\":\"");
  js::raw(p, ev, std::strlen(ev));
  js::lit(p, "\",\"seq\":");
  js::u64(p, seq);
  js::lit(p, ",\"t_ns\":");
  js::u64(p, t_ns);
  js::lit(p, ",\"ctx\":");
  js::hex(p, ctx);
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
  ctx_.store(h.ctx, std::memory_order_relaxed);
  try {
    const LineBuffer line(kLineFixed + js::escaped_bound(h.backend));
    char* const buf = line.data();
    char* p = buf;
    put_head(p, "open", seq_.fetch_add(1, std::memory_order_relaxed), event_clock_ns(), h.ctx);
    js::lit(p, ",\"v\":1,\"backend\":");
    js::str(p, h.backend);
    js::lit(p, ",\"device\":");
    js::i64(p, h.device);
    js::lit(p, ",\"pool\":");
    js::boolean(p, h.pool);
    js::lit(p, ",\"redzone\":");
    js::u64(p, h.redzone);
    js::lit(p, ",\"pid\":");
    js::u64(p, static_cast<uint64_t>(::getpid()));
    js::lit(p, "}\n");
    sink->append(buf, static_cast<size_t>(p - buf));
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
  char buf[kLineFixed];
  char* p = buf;
  put_head(p, "close", seq_.fetch_add(1, std::memory_order_relaxed), event_clock_ns(),
           ctx_.load(std::memory_order_relaxed));
  js::lit(p, "}\n");
  sink->append(buf, static_cast<size_t>(p - buf));
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

void EventLog::emit(const char* line, size_t n) noexcept {
  std::shared_ptr<EventSink> sink = std::atomic_load(&sink_);
  if (sink) sink->append(line, n);
}

void EventLog::mem_line(const char* ev, Ticket t, const EventMem& m,
                        const EventPoolState& pool) noexcept {
  try {
    const bool is_free = std::strcmp(ev, "free") == 0;
    const LineBuffer line(kLineFixed + js::escaped_bound(m.file) +
                          (is_free ? js::escaped_bound(m.free_file) : 0) +
                          (m.tag != nullptr ? js::escaped_bound(m.tag) : 0));
    char* const buf = line.data();
    char* p = buf;
    put_head(p, ev, t.seq, t.t_ns, ctx_.load(std::memory_order_relaxed));
    js::lit(p, ",\"stream\":");
    js::hex(p, m.stream);
    js::lit(p, ",\"bytes\":");
    js::u64(p, m.bytes);
    js::lit(p, ",\"ptr\":");
    if (std::strcmp(ev, "oom") == 0) {
      js::lit(p, "null");
    } else {
      js::hex(p, m.ptr);
    }
    if (m.kind == METRALE_ALLOC_MANAGED) {
      js::lit(p, ",\"kind\":\"managed\",\"site\":");
    } else {
      js::lit(p, ",\"kind\":\"device\",\"site\":");
    }
    js::site(p, m.file, m.line);
    js::lit(p, ",\"tag\":");
    if (m.tag != nullptr) {
      js::str(p, m.tag);
    } else {
      js::lit(p, "null");
    }
    if (is_free) {
      js::lit(p, ",\"free_site\":");
      js::site(p, m.free_file, m.free_line);
      js::lit(p, ",\"sweep\":");
      js::boolean(p, m.sweep);
    }
    put_pool(p, pool);
    js::lit(p, "}\n");
    emit(buf, static_cast<size_t>(p - buf));
  } catch (...) {
    // Out of host memory for the buffer: the line is dropped.
  }
}

void EventLog::alloc(Ticket t, const EventMem& m, const EventPoolState& pool) noexcept {
  if (t.seq == 0 && t.t_ns == 0) t = take_ticket();  // a log opened meanwhile
  mem_line("alloc", t, m, pool);
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
    const size_t shown = findings.size() < kMaxScanFindings ? findings.size() : kMaxScanFindings;
    size_t bound = kLineFixed + js::escaped_bound(which);
    for (size_t i = 0; i < shown; ++i) bound += 128 + js::escaped_bound(findings[i].file);
    const LineBuffer line(bound);
    char* const buf = line.data();
    char* p = buf;
    const Ticket t = take_ticket();
    put_head(p, "scan", t.seq, t.t_ns, ctx_.load(std::memory_order_relaxed));
    js::lit(p, ",\"scan\":");
    js::str(p, which);
    js::lit(p, ",\"violations\":");
    js::u64(p, violations);
    js::lit(p, ",\"found\":[");
    for (size_t i = 0; i < shown; ++i) {
      const EventScanFinding& f = findings[i];
      if (i > 0) *p++ = ',';
      js::lit(p, "{\"ptr\":");
      js::hex(p, f.ptr);
      js::lit(p, ",\"bytes\":");
      js::u64(p, f.bytes);
      js::lit(p, ",\"site\":");
      js::site(p, f.file, f.line);
      js::lit(p, ",\"first_bad_offset\":");
      js::u64(p, f.first_bad_offset);
      *p++ = '}';
    }
    *p++ = ']';
    put_pool(p, pool);
    js::lit(p, "}\n");
    emit(buf, static_cast<size_t>(p - buf));
  } catch (...) {
    // Out of host memory for the buffer: the line is dropped.
  }
}

}  // namespace metrale::core
