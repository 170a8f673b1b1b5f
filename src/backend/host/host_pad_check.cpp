// The stream-ordered check of freed pads (Backend::pad_check_async) on host
// memory: host stream work runs at once in the caller's thread, so the pass
// is done on return and its ticket only carries the results to
// pad_check_take.
#include <cstring>
#include <string>
#include <utility>
#include <vector>

#include "backend/host/host_backend.hpp"
#include "backend/host/pattern_bytes.hpp"

namespace metrale::backend::host {

namespace {

Backend::PadCheck check_and_restore(uint8_t* p, size_t bytes, uint8_t byte) {
  Backend::PadCheck r{0, 0, byte};
  const uint64_t differ = count_other(p, byte, bytes);
  if (differ == 0) return r;
  r.bad_bytes = differ > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(differ);
  for (size_t k = 0; k < bytes; ++k) {
    const uint8_t v = __atomic_load_n(p + k, __ATOMIC_RELAXED);
    if (v == byte) continue;
    r.first_bad = k;
    r.found = v;
    break;
  }
  store_bytes(p, byte, bytes);
  return r;
}

}  // namespace

uint64_t HostBackend::pad_check_async(const Range* ranges, size_t n, uint8_t byte,
                                      StreamHandle s) {
  fault_.throw_if_lost();
  if (ranges == nullptr || n == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: pad_check_async with no ranges");
  }
  auto stream = usable_stream(s);
  std::vector<PadCheck> results(n);
  {
    // As a stream op: after the stream's earlier work, never beside it.
    std::lock_guard<StreamLock> lock(stream->mutex);
    if (stream->capturing) {
      fail(METRALE_ERROR_CAPTURE,
           "host backend: the red-zone check of freed blocks cannot be queued on a capturing "
           "stream");
    }
    regions_.access(ranges, n, [&] {
      for (size_t i = 0; i < n; ++i) {
        uint8_t* p = reinterpret_cast<uint8_t*>(static_cast<uintptr_t>(ranges[i].ptr));
        // A pad and the slack after it come as two adjacent ranges: one
        // count over both, and each on its own only when that finds a byte.
        if (i + 1 < n && ranges[i].ptr + ranges[i].bytes == ranges[i + 1].ptr &&
            count_other(p, byte, ranges[i].bytes + ranges[i + 1].bytes) == 0) {
          results[i] = PadCheck{0, 0, byte};
          results[++i] = PadCheck{0, 0, byte};
          continue;
        }
        results[i] = check_and_restore(p, ranges[i].bytes, byte);
      }
    });
  }
  std::lock_guard<std::mutex> lock(pad_checks_mutex_);
  const uint64_t ticket = ++next_pad_check_;
  pad_checks_.emplace(ticket, std::move(results));
  return ticket;
}

bool HostBackend::pad_check_take(uint64_t t, bool wait, PadCheck* out) {
  (void)wait;  // finished when queued
  std::vector<PadCheck> results;
  {
    std::lock_guard<std::mutex> lock(pad_checks_mutex_);
    auto it = pad_checks_.find(t);
    if (it == pad_checks_.end()) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "host backend: pad check ticket " + std::to_string(t) + " was never issued or is spent");
    }
    results = std::move(it->second);
    pad_checks_.erase(it);
  }
  fault_.throw_if_lost();
  if (!results.empty()) std::memcpy(out, results.data(), results.size() * sizeof(PadCheck));
  return true;
}

}  // namespace metrale::backend::host
