#include "backend/host/host_backend.hpp"

#include <cstdlib>

#include "backend/env_number.hpp"
#include "backend/host/process_pins.hpp"
#include "backend/host/system_info.hpp"

namespace metrale::backend {

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<host::HostBackend>(); }

namespace host {

HostBackend::HostBackend() : physical_memory_(physical_memory_bytes()) {
  // A test hook, read once: lets a suite see what a failed driver free does
  // to the layers above (the ledger must be left as it was).
  const char* v = std::getenv("METRALE_TEST_HOST_FAIL_FREE");
  if (v != nullptr && *v != '\0') {
    fail_free_at_ = parse_env_number("METRALE_TEST_HOST_FAIL_FREE", v, UINT64_MAX);
  }
  // Likewise for pinned allocations: shows which calls the pinned pool
  // serves without the backend.
  v = std::getenv("METRALE_TEST_HOST_FAIL_PINNED");
  if (v != nullptr && *v != '\0') {
    fail_pinned_at_ = parse_env_number("METRALE_TEST_HOST_FAIL_PINNED", v, UINT64_MAX);
  }
}

// Core frees what it allocated before destroying the backend; whatever is
// left (arenas the caller forgot, a failed teardown) is freed here so a
// context never leaks host memory.
HostBackend::~HostBackend() {
  ProcessPins::instance().remove_owner(this);
  for (uintptr_t base : regions_.drain_owned()) std::free(reinterpret_cast<void*>(base));
}

std::shared_ptr<HostStream> HostBackend::usable_stream(StreamHandle s) {
  fault_.throw_if_lost();
  return streams_.get(s);
}

}  // namespace host
}  // namespace metrale::backend
