#include "core/pinned_registry.hpp"

#include "backend/error.hpp"
#include "core/format.hpp"

namespace metrale::core {
namespace {
const char* kind_name(PinKind k) {
  return k == PinKind::Allocated ? "metrale_host_alloc_pinned" : "metrale_host_register";
}
}  // namespace

void PinnedRegistry::add(void* base, size_t bytes, PinKind kind) {
  uintptr_t lo = reinterpret_cast<uintptr_t>(base);
  if (lo + bytes < lo) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host range " + hex(lo) + " + " + std::to_string(bytes) +
                                             " bytes wraps around the address space");
  }
  std::lock_guard<std::mutex> lock(mutex_);
  auto next = ranges_.lower_bound(lo);
  const PinnedRange* clash = nullptr;
  if (next != ranges_.end() && next->first < lo + bytes) clash = &next->second;
  if (clash == nullptr && next != ranges_.begin()) {
    auto prev = std::prev(next);
    if (prev->first + prev->second.bytes > lo) clash = &prev->second;
  }
  if (clash != nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host range " + hex(lo) + " (" + std::to_string(bytes) + " bytes) overlaps " + hex(clash->base) +
             " (" + std::to_string(clash->bytes) + " bytes) already page-locked by " +
             kind_name(clash->kind));
  }
  ranges_.emplace(lo, PinnedRange{lo, bytes, kind});
}

PinnedRange PinnedRegistry::remove(void* base, PinKind kind) {
  uintptr_t p = reinterpret_cast<uintptr_t>(base);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.find(p);
  if (it == ranges_.end()) {
    fail(METRALE_ERROR_NOT_FOUND, hex(p) + " was not given by " + std::string(kind_name(kind)) +
                                      " in this context (or was already released)");
  }
  if (it->second.kind != kind) {
    fail(METRALE_ERROR_NOT_FOUND, hex(p) + " comes from " + kind_name(it->second.kind) +
                                      ", not from " + kind_name(kind));
  }
  PinnedRange r = it->second;
  ranges_.erase(it);
  return r;
}

bool PinnedRegistry::find(const void* p, size_t bytes, PinnedRange* out) const {
  uintptr_t lo = reinterpret_cast<uintptr_t>(p);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = ranges_.upper_bound(lo);
  if (it == ranges_.begin()) return false;
  --it;
  const PinnedRange& r = it->second;
  uint64_t off = lo - r.base;
  if (off >= r.bytes || bytes > r.bytes - off) return false;
  *out = r;
  return true;
}

std::vector<PinnedRange> PinnedRegistry::all() const {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<PinnedRange> out;
  for (const auto& kv : ranges_) out.push_back(kv.second);
  return out;
}

}  // namespace metrale::core
