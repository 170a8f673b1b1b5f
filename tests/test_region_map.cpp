// The host backend's map of device-visible memory (src/backend/host/
// region_map.hpp) on its own: a batch of ranges is accepted only when each
// lies inside one region, also when the ranges before it hit a region (the
// batch check skips the lookup for ranges inside the last region found);
// the host pattern compare counts every differing byte, in and out of its
// word groups.
// Usage: test_region_map [CASE]
#include <cstdint>
#include <vector>

#include "backend/error.hpp"
#include "backend/host/pattern_bytes.hpp"
#include "backend/host/region_map.hpp"
#include "core_check.hpp"

using metrale::backend::host::CheckedRange;
using metrale::backend::host::RegionKind;
using metrale::backend::host::RegionMap;

namespace {

constexpr uintptr_t kA = 0x10000, kB = 0x30000;  // two regions, a gap between
constexpr size_t kBytes = 0x10000;

void make(RegionMap* m) {
  m->add_owned(kA, kBytes, RegionKind::Device);
  m->add_owned(kB, kBytes, RegionKind::Device);
}

bool refused(const RegionMap& m, const std::vector<CheckedRange>& ranges) {
  try {
    m.check(ranges.data(), ranges.size());
    return false;
  } catch (const metrale::Error& e) {
    CHECK_EQ(e.status(), METRALE_ERROR_INVALID_ARGUMENT);
    return true;
  }
}

void accepts_ranges_inside_regions() {
  RegionMap m;
  make(&m);
  CHECK(!refused(m, {{kA, 64}, {kA + 64, 64}, {kB, kBytes}, {kA + kBytes - 1, 1}, {kB, 0}}));
  bool ran = false;
  m.access(std::vector<CheckedRange>{{kA, 8}, {kB + 8, 8}}.data(), 2, [&] { ran = true; });
  CHECK(ran);
}

void refuses_a_range_after_a_hit() {
  RegionMap m;
  make(&m);
  // Each bad range follows a good one in the same region, so a lookup
  // skipped wrongly would let it through.
  CHECK(refused(m, {{kA, 64}, {kA + kBytes - 8, 16}}));          // runs past A's end
  CHECK(refused(m, {{kA, 64}, {kA + kBytes, 8}}));               // starts at A's end
  CHECK(refused(m, {{kA + 64, 64}, {kA - 8, 16}}));              // starts before A
  CHECK(refused(m, {{kA, 64}, {kA + kBytes + 0x100, 8}}));       // in the gap
  CHECK(refused(m, {{kB, 64}, {kB + 8, SIZE_MAX - 4}}));         // wraps
  CHECK(refused(m, {{kA, 64}, {kA + 0x100, kBytes + kBytes}}));  // spans A, the gap, B
  bool ran = false;
  try {
    m.access(std::vector<CheckedRange>{{kA, 8}, {kA + kBytes, 8}}.data(), 2, [&] { ran = true; });
  } catch (const metrale::Error&) {
  }
  CHECK(!ran);  // nothing runs on a refused batch
}

void pattern_compare_counts_every_byte() {
  using metrale::backend::host::count_other;
  alignas(8) uint8_t buf[200];
  for (size_t start : {size_t{0}, size_t{3}}) {
    for (size_t n : {size_t{0}, size_t{7}, size_t{32}, size_t{100}, size_t{190}}) {
      for (uint8_t& b : buf) b = 0xA5;
      CHECK_EQ(count_other(buf + start, 0xA5, n), 0u);
      uint64_t planted = 0;
      for (size_t k = 0; k < n; k += 13) {
        buf[start + k] = 0x5A;
        ++planted;
      }
      if (n > 0) {
        buf[start + n - 1] = 0x00;  // the last byte, in any group
        planted += (n - 1) % 13 != 0;
      }
      CHECK_EQ(count_other(buf + start, 0xA5, n), planted);
      // One differing byte at each offset: alone in its word and in its
      // group of words, wherever it lies.
      for (uint8_t& b : buf) b = 0xA5;
      uint64_t missed = 0;
      for (size_t k = 0; k < n; ++k) {
        buf[start + k] = 0xA4;
        missed += count_other(buf + start, 0xA5, n) != 1;
        buf[start + k] = 0xA5;
      }
      CHECK_EQ(missed, 0u);
    }
  }
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"accepts_ranges_inside_regions", accepts_ranges_inside_regions},
      {"refuses_a_range_after_a_hit", refuses_a_range_after_a_hit},
      {"pattern_compare_counts_every_byte", pattern_compare_counts_every_byte},
  });
}
