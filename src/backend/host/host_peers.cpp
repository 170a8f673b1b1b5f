// Several devices on the host backend: METRALE_HOST_DEVICES=N simulates N
// devices, so multi-device code (a context per device, peer access, peer
// copies, per-device ledgers) runs and is tested where there is no GPU. The
// simulated devices share the host's memory; what differs per device is
// what a GPU keeps per device: the ordinal, the allocations (each context's
// region map) and the streams.
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "backend/env_number.hpp"
#include "backend/host/host_backend.hpp"

namespace metrale::backend {

int host_device_count() {
  const char* v = std::getenv("METRALE_HOST_DEVICES");
  if (v == nullptr || *v == '\0') return 1;
  const uint64_t n = parse_env_number("METRALE_HOST_DEVICES", v, 1024);
  if (n == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "METRALE_HOST_DEVICES='0' is malformed: expected 1 to 1024 simulated devices");
  }
  return static_cast<int>(n);
}

std::unique_ptr<Backend> make_host_backend(int device) {
  const int count = host_device_count();
  if (device < 0 || device >= count) {
    fail(METRALE_ERROR_NO_DEVICE,
         "host device " + std::to_string(device) + " does not exist: the host backend simulates " +
             std::to_string(count) + " device(s), ordinals 0.." + std::to_string(count - 1) +
             " (set METRALE_HOST_DEVICES=<n> for more)");
  }
  return std::make_unique<host::HostBackend>(device);
}

namespace host {

std::string HostBackend::peer_refusal(Backend& peer) {
  auto* other = dynamic_cast<HostBackend*>(&peer);
  if (other == nullptr) {
    return "host device " + std::to_string(ordinal_) +
           " cannot reach the memory of a cuda device: peers must be of one backend";
  }
  if (other->ordinal_ == ordinal_) return std::string();
  if (no_peer_ || other->no_peer_) {
    return "host backend: no peer path between simulated devices " + std::to_string(ordinal_) +
           " and " + std::to_string(other->ordinal_) +
           " (METRALE_TEST_HOST_NO_PEER=1 was set when one of them was created)";
  }
  return std::string();
}

// The simulated devices share one address space: enabling is a check only.
void HostBackend::peer_access_enable(Backend& peer) {
  fault_.throw_if_lost();
  std::string why = peer_refusal(peer);
  if (!why.empty()) fail(METRALE_ERROR_UNSUPPORTED, why);
}

// src is checked against this device's regions and dst against the peer's,
// at enqueue and again while the copy runs (each map held shared), as for
// a d2d copy. Core never calls this on a capturing stream, so the op runs
// now, in this thread, while both contexts are alive.
void HostBackend::copy_peer_async(DevPtr dst, Backend& dst_owner, DevPtr src, size_t bytes,
                                  StreamHandle s) {
  auto* peer = dynamic_cast<HostBackend*>(&dst_owner);
  if (peer == nullptr) {
    fail(METRALE_ERROR_UNSUPPORTED,
         "host backend: copy_peer to a cuda context: peers must be of one backend");
  }
  auto stream = usable_stream(s);
  peer->fault_.throw_if_lost();
  if (bytes == 0) return;
  regions_.check({{src, bytes}});
  peer->regions_.check({{dst, bytes}});
  // Run now under the stream's lock, never recorded: a graph would keep a
  // pointer to the peer backend past its context (a capture begun by
  // another thread since core's check is refused here).
  std::lock_guard<StreamLock> lock(stream->mutex);
  if (stream->capturing) {
    fail(METRALE_ERROR_CAPTURE, "host backend: copy_peer on a capturing stream is not recorded");
  }
  // Both maps held shared while the bytes move, always the map at the lower
  // address first: copies both ways at once never take them in two orders.
  auto move = [&] {
    std::memmove(reinterpret_cast<void*>(static_cast<uintptr_t>(dst)),
                 reinterpret_cast<const void*>(static_cast<uintptr_t>(src)), bytes);
  };
  if (std::less<const RegionMap*>()(&regions_, &peer->regions_)) {
    regions_.access({{src, bytes}}, [&] { peer->regions_.access({{dst, bytes}}, move); });
  } else {
    peer->regions_.access({{dst, bytes}}, [&] { regions_.access({{src, bytes}}, move); });
  }
}

}  // namespace host
}  // namespace metrale::backend
