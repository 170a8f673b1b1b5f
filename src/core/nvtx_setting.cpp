#include "core/nvtx_setting.hpp"

#include <cstdlib>
#include <cstring>
#include <string>

#include "backend/error.hpp"

namespace metrale::core {

backend::Backend::Annotations nvtx_setting() {
  using A = backend::Backend::Annotations;
  const char* v = std::getenv("METRALE_NVTX");
  if (v == nullptr || *v == '\0') return A::AUTO;
  if (std::strcmp(v, "1") == 0) return A::ON;
  if (std::strcmp(v, "0") == 0) return A::OFF;
  fail(METRALE_ERROR_INVALID_ARGUMENT,
       std::string("METRALE_NVTX='") + v + "' is malformed: expected 0 or 1 (or unset: auto)");
}

}  // namespace metrale::core
