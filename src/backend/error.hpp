// The one exception type inside the library. Every layer throws it; the
// api shims catch it and turn it into a status plus the thread-local message.
#pragma once

#include <stdexcept>
#include <string>

#include "metrale_gpu.h"

namespace metrale {

class Error : public std::runtime_error {
 public:
  Error(metrale_status_t status, std::string message, int driver_code = 0)
      : std::runtime_error(std::move(message)), status_(status), driver_code_(driver_code) {}

  metrale_status_t status() const noexcept { return status_; }
  // The raw driver status (CUresult) behind this error; 0 when none.
  int driver_code() const noexcept { return driver_code_; }

 private:
  metrale_status_t status_;
  int driver_code_;
};

[[noreturn]] inline void fail(metrale_status_t status, std::string message, int driver_code = 0) {
  throw Error(status, std::move(message), driver_code);
}

}  // namespace metrale
