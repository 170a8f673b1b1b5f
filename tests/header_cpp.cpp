// The header compiled as C++ (-Wall -Wextra -pedantic -Werror): extern "C"
// linkage and no C-only constructs. Uses a few types and macros.
#include "metrale_gpu.h"

#include <type_traits>

static_assert(std::is_same<metrale_devptr_t, uint64_t>::value, "devptr is uint64_t");
static_assert(sizeof(metrale_dim3_t) == 12, "dim3 is three uint32_t");
static_assert(METRALE_OK == 0, "OK is zero");

int main() {
  metrale_context_options_t opts{};
  opts.struct_size = sizeof opts;
  opts.backend = METRALE_BACKEND_AUTO;
  metrale_allocation_t a{};
  a.kind = METRALE_ALLOC_MANAGED;
  metrale_redzone_violation_t v{};
  v.expected = static_cast<uint8_t>(METRALE_REDZONE_PATTERN);
  metrale_status_t (*status_fn)(int*, int*, int*) = &metrale_version;
  const char* (*name_fn)(metrale_status_t) = &metrale_status_name;
  return (status_fn != nullptr && name_fn != nullptr && a.kind == 1 && v.expected == 0xA5 &&
          opts.struct_size != 0)
             ? 0
             : 1;
}
