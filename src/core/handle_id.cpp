#include "core/handle_id.hpp"

#include <atomic>

#include "backend/error.hpp"

namespace metrale::core::handle_id {
namespace {
// Shared by every handle kind and every context (and not reset by fork():
// the child goes on from the parent's count, so it never reissues a value
// the parent handed out before the fork either).
std::atomic<uint64_t> g_next_serial{1};
}  // namespace

uint64_t next_serial() {
  uint64_t s = g_next_serial.fetch_add(1, std::memory_order_relaxed);
  if (s > kSerialMask) {
    fail(METRALE_ERROR_OUT_OF_MEMORY,
         "handle identities are exhausted: this process made 2^41 handles, and a handle value "
         "is never issued twice");
  }
  return s;
}

}  // namespace metrale::core::handle_id
