// Reading a module image from a path the caller gives: only a regular file,
// only up to METRALE_MODULE_FILE_MAX_BYTES, and never a blocking open.
#pragma once

#include <vector>

namespace metrale::core {

// The whole file at `path`. Throws NOT_FOUND when it cannot be opened or
// read, INVALID_ARGUMENT when it is not a regular file (a directory, FIFO,
// socket or device such as /dev/zero), is empty, or is larger than
// METRALE_MODULE_FILE_MAX_BYTES. Returns promptly in every case: the open
// does not wait for a FIFO's writer and nothing is read before the checks.
std::vector<char> read_module_file(const char* path);

}  // namespace metrale::core
