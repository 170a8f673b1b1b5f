// Where event-log lines go: one buffered writer per file path in the
// process, shared by every context that logs to that path (torch's one
// context per device, several contexts in one test), so lines are never
// interleaved mid-line and the file is truncated once, at its first open.
//
// Writes are appended to an in-memory buffer under the sink's own mutex and
// written out (write(2), whole buffer) when it passes kFlushBytes, on
// flush(), when the last user closes it, and at process exit (atexit), so a
// process that never destroys its context still leaves a complete file.
// The mutex is a leaf: nothing else is locked while it is held.
// fork(): a child never writes what its parent had buffered (see pid_).
#pragma once

#include <sys/types.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

namespace metrale::core {

class EventSink {
 public:
  static constexpr size_t kFlushBytes = 64 * 1024;

  // The sink for path, opened (O_TRUNC) if no context of this process has
  // it open, else the shared one. Throws INVALID_ARGUMENT naming path and
  // errno's text when the file cannot be opened.
  static std::shared_ptr<EventSink> open(const std::string& path);
  ~EventSink();  // flushes and closes
  EventSink(const EventSink&) = delete;
  EventSink& operator=(const EventSink&) = delete;

  // Appends one line (line must end in '\n'). Never throws: a line that
  // cannot be buffered or written is counted in lost().
  void append(const char* line, size_t n) noexcept;
  // Writes the buffer out. false when a write failed (then lost() > 0).
  bool flush() noexcept;
  uint64_t lost() const;
  const std::string& path() const { return path_; }
  // Every open sink flushed (the atexit hook; also usable by tests).
  static void flush_all() noexcept;

 private:
  EventSink(std::string path, int fd);
  bool write_out_locked() noexcept;

  const std::string path_;
  int fd_;
  // The process that opened it. After fork() the child's copy holds the
  // parent's buffered lines: it never writes them (the parent will), and a
  // child opening the same file gets a sink of its own.
  const pid_t pid_;
  mutable std::mutex mu_;
  std::string buf_;
  uint64_t lost_ = 0;
};

}  // namespace metrale::core
