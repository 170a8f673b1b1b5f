// The integer a caller stored in an enum-typed argument or field. A C caller
// may pass any int (43 as a metrale_status_t); in C++ loading a value outside
// the enum's range through the enum type is undefined (UBSan's -fsanitize=enum
// stops there), so range checks read the bits as an int instead.
#pragma once

#include <cstring>
#include <type_traits>

namespace metrale::core {

template <class E>
int raw_enum(const E& value) {
  static_assert(std::is_enum_v<E> && sizeof(E) == sizeof(int), "an int-sized enum");
  int bits;
  std::memcpy(&bits, &value, sizeof bits);
  return bits;
}

}  // namespace metrale::core
