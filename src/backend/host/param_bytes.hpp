// A kernel's parameter bytes, aligned for the most aligned parameter: a host
// kernel reads each value through a typed pointer, so a parameter aligned
// to 16 or 32 (a struct with alignas) needs storage aligned as much. Copies
// keep the alignment (each launch and each replay gets its own copy).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

namespace metrale::backend::host {

class ParamBytes {
 public:
  ParamBytes() = default;
  // `bytes` zeroed bytes aligned to `align` (a power of two).
  ParamBytes(size_t bytes, size_t align) : bytes_(bytes), align_(align < 8 ? 8 : align) {
    // The slack lets data() round up to align_ inside the 8-aligned words.
    raw_.assign(words(bytes_) + words(align_ - 8), 0);
  }
  ParamBytes(const ParamBytes& other) : ParamBytes(other.bytes_, other.align_) {
    if (bytes_ != 0) std::memcpy(data(), other.data(), bytes_);
  }
  ParamBytes& operator=(const ParamBytes& other) {
    if (this != &other) {
      ParamBytes copy(other);
      *this = std::move(copy);
    }
    return *this;
  }
  // A moved vector keeps its buffer, so the aligned position stays valid.
  ParamBytes(ParamBytes&&) noexcept = default;
  ParamBytes& operator=(ParamBytes&&) noexcept = default;

  unsigned char* data() { return aligned(raw_.data()); }
  const unsigned char* data() const { return aligned(raw_.data()); }
  size_t size() const { return bytes_; }

 private:
  // Rounds up without (bytes + 7) wrapping near SIZE_MAX.
  static size_t words(size_t bytes) { return bytes / 8 + (bytes % 8 != 0 ? 1 : 0); }
  unsigned char* aligned(const uint64_t* p) const {
    auto at = reinterpret_cast<uintptr_t>(p);
    at = (at + align_ - 1) & ~static_cast<uintptr_t>(align_ - 1);
    return reinterpret_cast<unsigned char*>(at);
  }

  std::vector<uint64_t> raw_;
  size_t bytes_ = 0;
  size_t align_ = 8;
};

}  // namespace metrale::backend::host
