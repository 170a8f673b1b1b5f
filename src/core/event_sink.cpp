#include "core/event_sink.hpp"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <map>
#include <utility>
#include <vector>

#include "backend/error.hpp"

namespace metrale::core {
namespace {

// Sinks by the file's identity (device, inode), not its spelling: two
// contexts naming one file as "log" and "./log" share one writer instead of
// truncating each other's lines. Leaked on purpose: the atexit hook and
// late contexts must find it whatever the static destruction order.
struct Registry {
  std::mutex mu;
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<EventSink>> sinks;
};

Registry& registry() {
  static Registry* r = new Registry;
  return *r;
}

void flush_at_exit() { EventSink::flush_all(); }

}  // namespace

std::shared_ptr<EventSink> EventSink::open(const std::string& path) {
  if (path.empty()) fail(METRALE_ERROR_INVALID_ARGUMENT, "event log: the path is empty");
  static const bool hooked = std::atexit(flush_at_exit) == 0;
  (void)hooked;
  // Not O_TRUNC yet: a file another context of this process is writing
  // must not lose what it has. O_NONBLOCK: a FIFO with no reader fails
  // (ENXIO) instead of blocking the caller until one comes (rule 6).
  const int fd =
      ::open(path.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | O_NONBLOCK, 0644);
  if (fd < 0) {
    const int err = errno;
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "event log: cannot open '" + path + "' for writing: " + std::strerror(err) +
             (err == ENXIO ? " (not a regular file: a FIFO or socket with no reader)" : ""));
  }
  struct stat st {};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    const int err = errno;
    ::close(fd);
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "event log: '" + path + "' is not a regular file" +
             (S_ISREG(st.st_mode) ? std::string(": ") + std::strerror(err) : std::string()));
  }
  // A regular file: writes as before, blocking (they never wait long).
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  Registry& r = registry();
  std::lock_guard<std::mutex> lock(r.mu);
  auto key = std::make_pair(st.st_dev, st.st_ino);
  auto it = r.sinks.find(key);
  if (it != r.sinks.end()) {
    auto shared = it->second.lock();
    if (shared && shared->pid_ == ::getpid()) {
      ::close(fd);
      return shared;
    }
  }
  if (::ftruncate(fd, 0) != 0) {
    const int err = errno;
    ::close(fd);
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "event log: cannot truncate '" + path + "': " + std::strerror(err));
  }
  std::shared_ptr<EventSink> sink(new EventSink(path, fd));
  r.sinks[key] = sink;
  return sink;
}

EventSink::EventSink(std::string path, int fd)
    : path_(std::move(path)), fd_(fd), pid_(::getpid()) {}

EventSink::~EventSink() {
  if (pid_ == ::getpid()) flush();
  ::close(fd_);
  // The registry's weak entry stays until a later open of the same file
  // replaces it (a dead weak_ptr is never handed out).
}

void EventSink::append(const char* line, size_t n) noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  try {
    buf_.append(line, n);
  } catch (...) {
    ++lost_;  // no memory for the buffer: the line is dropped, counted
    return;
  }
  if (buf_.size() >= kFlushBytes) write_out_locked();
}

// No warning is logged here: the log line could reach a user callback that
// calls back into the event log. close() and flush() report the loss.
bool EventSink::flush() noexcept {
  std::lock_guard<std::mutex> lock(mu_);
  return write_out_locked();
}

bool EventSink::write_out_locked() noexcept {
  size_t done = 0;
  bool ok = true;
  while (done < buf_.size()) {
    const ssize_t w = ::write(fd_, buf_.data() + done, buf_.size() - done);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) {
      ok = false;
      // Whole lines lost: count the newlines of what was not written.
      for (size_t i = done; i < buf_.size(); ++i) lost_ += buf_[i] == '\n';
      break;
    }
    done += static_cast<size_t>(w);
  }
  buf_.clear();
  return ok && lost_ == 0;
}

uint64_t EventSink::lost() const {
  std::lock_guard<std::mutex> lock(mu_);
  return lost_;
}

void EventSink::flush_all() noexcept {
  std::vector<std::shared_ptr<EventSink>> live;
  {
    Registry& r = registry();
    std::lock_guard<std::mutex> lock(r.mu);
    for (auto& kv : r.sinks) {
      // A parent's sink in a forked child: its lines are the parent's to
      // write (and its lock may have been held by a thread the child lacks).
      auto s = kv.second.lock();
      if (s && s->pid_ == ::getpid()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->flush();
}

}  // namespace metrale::core
