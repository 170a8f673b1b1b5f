// Stager: the decision to stage one copy, and the log lines about the ring.
#include "core/staging/stager.hpp"

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <thread>

#include "backend/error.hpp"

#include "core/log.hpp"
#include "core/staging/staged_copy.hpp"

namespace metrale::core::staging {

namespace {

// More memcpy threads than the machine has cores only take turns (measured
// 8x slower than a direct copy on a 2-core machine with 4 threads).
uint32_t usable_threads(uint32_t asked) {
  const unsigned cores = std::thread::hardware_concurrency();
  return cores == 0 ? asked : std::min<uint32_t>(asked, std::max(1u, cores));
}

// METRALE_STAGING_STORES; unset or empty: "auto" (stream_copy.hpp).
StorePolicy store_policy_from_env() {
  const char* v = std::getenv("METRALE_STAGING_STORES");
  StorePolicy policy;
  if (v == nullptr || *v == '\0' || parse_store_policy(v, &policy)) return policy;
  metrale::fail(METRALE_ERROR_INVALID_ARGUMENT,
                std::string("METRALE_STAGING_STORES is \"") + v +
                    "\": expected \"auto\", \"streaming\" or \"cached\"");
}

// Whether the host range shares bytes with the device range (the host
// backend's device memory is host memory, as is managed memory): staged
// pieces would then overwrite source bytes not yet read, which the direct
// copy (memmove on the host backend) does not.
bool overlaps(const void* host, backend::DevPtr dev, size_t bytes) {
  const auto h = reinterpret_cast<uintptr_t>(host);
  return h < dev + bytes && dev < h + bytes;
}

}  // namespace

Stager::Stager(const metrale_context_options_t& o)
    : threshold_(o.staging_threshold),
      stores_(store_policy_from_env()),
      ring_(o.staging_buffer_bytes, o.staging_buffers),
      workers_(usable_threads(o.staging_threads)) {}

StagingRing::Lease Stager::take(StagingDevice& dev, bool* fresh) {
  // Never waits for the ring: another thread's staged copy, or a log
  // callback's during this one, copies directly instead (rule 5).
  std::string failure;
  StagingRing::Lease lease = ring_.try_take(dev, &failure, fresh);
  if (!failure.empty()) {
    // No lease is held on this path.
    log().debug("staging off for this context: the pinned staging ring could not be "
                "allocated ({}); pageable copies go directly", failure);
  }
  return lease;
}

void Stager::log_ring_allocated() const {
  log().debug("staging ring allocated: {} pinned buffers of {} bytes, {} copy threads, "
              "{} stores h2d below {} bytes, {} from there, {} stores d2h",
              ring_.count(), ring_.buffer_bytes(), workers_.threads(),
              store_mode_name(stores_.h2d_below), kH2dCachedFrom,
              store_mode_name(stores_.h2d_from), store_mode_name(stores_.d2h_all));
}

template <class Copy>
bool Stager::with_ring(StagingDevice& dev, Copy&& copy) {
  bool fresh = false;
  try {
    StagingRing::Lease lease = take(dev, &fresh);
    if (!lease) return false;
    copy(lease);
  } catch (...) {
    if (fresh) log_ring_allocated();  // the lease is released by now
    throw;
  }
  if (fresh) log_ring_allocated();
  return true;
}

bool Stager::h2d(backend::Backend& b, backend::DevPtr dst, const void* src, size_t bytes,
                 backend::StreamHandle s) {
  if (overlaps(src, dst, bytes) || !b.device_range_known(dst, bytes)) return false;
  BackendDevice dev(b);
  return with_ring(dev, [&](StagingRing::Lease& lease) {
    staged_h2d(lease, workers_, dev, dst, src, bytes, s, stores_.h2d(bytes));
  });
}

bool Stager::d2h(backend::Backend& b, void* dst, backend::DevPtr src, size_t bytes,
                 backend::StreamHandle s) {
  if (overlaps(dst, src, bytes) || !b.device_range_known(src, bytes)) return false;
  BackendDevice dev(b);
  return with_ring(dev, [&](StagingRing::Lease& lease) {
    staged_d2h(lease, workers_, dev, dst, src, bytes, s, stores_.d2h(bytes));
  });
}

void Stager::release(backend::Backend& b) noexcept {
  BackendDevice dev(b);
  ring_.release(dev);
}

}  // namespace metrale::core::staging
