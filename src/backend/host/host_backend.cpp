#include "backend/host/host_backend.hpp"

#include <cstdio>
#include <cstdlib>

#include "backend/env_number.hpp"
#include "backend/host/process_pins.hpp"
#include "backend/host/system_info.hpp"

namespace metrale::backend {

namespace host {

HostBackend::HostBackend(int ordinal)
    : physical_memory_(physical_memory_bytes()), ordinal_(ordinal) {
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
  // And for the reports of counted bytes: each range pattern_count finds
  // bad is refilled with the byte it was counted against, as a
  // metrale_redzone_poison on another thread could between the count and
  // the read back that names the first bad byte.
  v = std::getenv("METRALE_TEST_HOST_REFILL_COUNTED");
  if (v != nullptr && *v != '\0') {
    refill_counted_ = parse_env_number("METRALE_TEST_HOST_REFILL_COUNTED", v, 1) == 1;
  }
  // And for peers: a device without a peer path to the others.
  v = std::getenv("METRALE_TEST_HOST_NO_PEER");
  if (v != nullptr && *v != '\0') {
    no_peer_ = parse_env_number("METRALE_TEST_HOST_NO_PEER", v, 1) == 1;
  }
}

// Core frees what it allocated before destroying the backend; whatever is
// left (arenas the caller forgot, a failed teardown) is freed here so a
// context never leaks host memory.
HostBackend::~HostBackend() {
  // Under the race tests' strict switch, a stream, event, graph or module
  // the core never destroyed is fatal too: on cuda it would outlive the
  // context.
  const char* strict = std::getenv("METRALE_HOST_DEAD_HANDLE_ABORT");
  if (strict != nullptr && strict[0] == '1' &&
      streams_.live_count() + events_.live_count() + graphs_.live_count() +
              kernels_.live_modules() != 0) {
    std::fprintf(stderr,
                 "host backend destroyed with %zu streams, %zu events, %zu graphs, %zu modules "
                 "live (METRALE_HOST_DEAD_HANDLE_ABORT=1)\n",
                 streams_.live_count(), events_.live_count(), graphs_.live_count(),
                 kernels_.live_modules());
    std::abort();
  }
  ProcessPins::instance().remove_owner(this);
  for (uintptr_t base : regions_.drain_owned()) std::free(reinterpret_cast<void*>(base));
}

std::shared_ptr<HostStream> HostBackend::usable_stream(StreamHandle s) {
  fault_.throw_if_lost();
  return streams_.get(s);
}

}  // namespace host
}  // namespace metrale::backend
