#include "backend/env_number.hpp"

#include <string>

#include "backend/error.hpp"

namespace metrale::backend {

uint64_t parse_env_number(const char* var, const char* value, uint64_t max) {
  const auto malformed = [&] {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string(var) + "='" + value + "' is malformed: expected a decimal number from 0 to " +
             std::to_string(max) + " (digits only: no sign, space or suffix)");
  };
  if (value == nullptr || *value == '\0') malformed();
  uint64_t n = 0;
  for (const char* p = value; *p != '\0'; ++p) {
    if (*p < '0' || *p > '9') malformed();
    const uint64_t digit = static_cast<uint64_t>(*p - '0');
    if (digit > max || n > (max - digit) / 10) malformed();  // n * 10 + digit > max, without wrapping
    n = n * 10 + digit;
  }
  return n;
}

}  // namespace metrale::backend
