#include "core/nvtx_setting.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/error.hpp"

namespace metrale::core {

bool nvtx_wanted() {
  const char* v = std::getenv("METRALE_NVTX");
  if (v == nullptr || *v == '\0' || std::strcmp(v, "1") == 0) return true;
  if (std::strcmp(v, "0") == 0) return false;
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string("METRALE_NVTX='") + v + "' is malformed: expected 0 or 1");
}

}  // namespace metrale::core
