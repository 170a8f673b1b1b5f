#include "backend/host/host_backend.hpp"

#include <cstdlib>

#include "backend/host/system_info.hpp"

namespace metrale::backend {

std::unique_ptr<Backend> make_host_backend() { return std::make_unique<host::HostBackend>(); }

namespace host {

HostBackend::HostBackend() : physical_memory_(physical_memory_bytes()) {}

// Core frees what it allocated before destroying the backend; whatever is
// left (arenas the caller forgot, a failed teardown) is freed here so a
// context never leaks host memory.
HostBackend::~HostBackend() {
  for (uintptr_t base : regions_.drain_owned()) std::free(reinterpret_cast<void*>(base));
}

std::shared_ptr<HostStream> HostBackend::usable_stream(StreamHandle s) {
  fault_.throw_if_lost();
  return streams_.get(s);
}

}  // namespace host
}  // namespace metrale::backend
