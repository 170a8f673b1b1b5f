#include "core/module_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "backend/error.hpp"
#include "metrale_gpu.h"

namespace metrale::core {
namespace {

const char* file_kind(mode_t mode) {
  if (S_ISDIR(mode)) return "a directory";
  if (S_ISFIFO(mode)) return "a FIFO";
  if (S_ISSOCK(mode)) return "a socket";
  if (S_ISCHR(mode)) return "a character device";
  if (S_ISBLK(mode)) return "a block device";
  return "not a regular file";
}

// Closes the descriptor on every path out, exceptions included.
struct Fd {
  int fd;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

[[noreturn]] void cannot_read(const char* path, int err) {
  fail(METRALE_ERROR_NOT_FOUND,
       std::string("cannot read module file '") + path + "': " + std::strerror(err));
}

}  // namespace

std::vector<char> read_module_file(const char* path) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // forever. The type is checked on the opened descriptor (not by a stat of
  // the path first), so the path cannot be swapped between check and read.
  Fd f{::open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY)};
  if (f.fd < 0) cannot_read(path, errno);
  struct stat st {};
  if (::fstat(f.fd, &st) != 0) cannot_read(path, errno);
  if (!S_ISREG(st.st_mode)) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("module file '") + path + "' is " +
                                             file_kind(st.st_mode) +
                                             ", not a regular file");
  }
  if (st.st_size <= 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("module file '") + path + "' is empty");
  }
  const auto size = static_cast<unsigned long long>(st.st_size);
  if (size > METRALE_MODULE_FILE_MAX_BYTES) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("module file '") + path + "' is " + std::to_string(size) +
             " bytes, more than METRALE_MODULE_FILE_MAX_BYTES (" +
             std::to_string(static_cast<unsigned long long>(METRALE_MODULE_FILE_MAX_BYTES)) +
             "); no module image is that large");
  }
  // Read what fstat promised and no more: a file growing meanwhile cannot
  // make the buffer grow past the cap.
  std::vector<char> image(static_cast<size_t>(size));
  size_t got = 0;
  while (got < image.size()) {
    ssize_t n = ::read(f.fd, image.data() + got, image.size() - got);
    if (n < 0) {
      if (errno == EINTR) continue;
      cannot_read(path, errno);
    }
    if (n == 0) break;  // shrank meanwhile
    got += static_cast<size_t>(n);
  }
  if (got == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("module file '") + path + "' is empty");
  }
  image.resize(got);
  return image;
}

}  // namespace metrale::core
