// The pinned pool's cache class on its own (src/core/pinned_cache.cpp),
// compiled into this program. It never touches the memory it tracks, so
// blocks here are made-up addresses. Plain checks: every failure prints its
// line; the exit status is 1 when any check failed.
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <thread>
#include <vector>

#include "core/pinned_cache.hpp"

using metrale::core::PinnedCache;

#include "core_check.hpp"

namespace {


constexpr size_t KiB = 1024, MiB = 1024 * 1024;

void* at(uintptr_t a) { return reinterpret_cast<void*>(a); }

// Classes: page multiples, never below the request, under 25% waste past
// 16 KiB, monotonic, and few of them (4 per power of two).
void size_classes() {
  CHECK(PinnedCache::class_size(1) == 4 * KiB);
  CHECK(PinnedCache::class_size(4 * KiB) == 4 * KiB);
  CHECK(PinnedCache::class_size(4 * KiB + 1) == 8 * KiB);
  CHECK(PinnedCache::class_size(16 * KiB + 1) == 20 * KiB);
  CHECK(PinnedCache::class_size(MiB) == MiB);
  CHECK(PinnedCache::class_size(MiB + 1) == MiB + 256 * KiB);
  size_t prev = 0, distinct = 0;
  for (size_t b = 1; b <= 256 * MiB; b += (b < 64 * KiB ? 97 : b / 37)) {
    const size_t c = PinnedCache::class_size(b);
    CHECK(c >= b);
    CHECK(c % (4 * KiB) == 0);
    if (b > 16 * KiB) CHECK(c - b < b / 4);
    CHECK(c >= prev);
    if (c != prev) ++distinct;
    prev = c;
  }
  CHECK(distinct <= 4 + 4 * 15);  // 16 KiB .. 256 MiB is 14 doublings
}

void block_bytes_and_bypass() {
  PinnedCache c(256 * MiB);
  CHECK(c.block_bytes(1000) == 4 * KiB);
  CHECK(c.block_bytes(256 * MiB) == 256 * MiB);
  CHECK(c.block_bytes(256 * MiB + 1) == 256 * MiB + 1);  // beyond the budget: exact
  CHECK(c.block_bytes(SIZE_MAX) == SIZE_MAX);             // no overflow
  CHECK(c.take(SIZE_MAX) == nullptr);
  c.adopt(at(0x10000000), 300 * MiB);  // bypassed: not tracked
  std::vector<PinnedCache::Block> ev;
  CHECK(!c.put(at(0x10000000), &ev));
  CHECK(!c.put(at(0x20000000), &ev));  // never adopted
  PinnedCache off(0);
  CHECK(!off.enabled());
  CHECK(off.block_bytes(1000) == 1000);
  off.adopt(at(0x30000000), 1000);
  CHECK(!off.put(at(0x30000000), &ev));
  CHECK(off.take(1000) == nullptr);
  CHECK(ev.empty());
}

void reuse_by_class_newest_first() {
  PinnedCache c(256 * MiB);
  std::vector<PinnedCache::Block> ev;
  c.adopt(at(0x100000), 1000);
  c.adopt(at(0x200000), 3000);
  c.adopt(at(0x300000), 64 * KiB);
  CHECK(c.take(1000) == nullptr);  // nothing cached yet
  CHECK(c.put(at(0x100000), &ev));
  CHECK(c.put(at(0x200000), &ev));
  CHECK(!c.put(at(0x200000), &ev));  // already cached: not twice
  CHECK(c.take(64 * KiB) == nullptr);  // another class
  CHECK(c.take(10) == at(0x200000));   // newest of the 4 KiB class
  CHECK(c.take(4096) == at(0x100000));
  CHECK(c.take(4096) == nullptr);
  const auto s = c.stats();
  CHECK(s.hits == 2);
  CHECK(s.misses == 3);
  CHECK(s.cached_blocks == 0 && s.cached_bytes == 0);
  CHECK(s.live_blocks == 3);
  CHECK(ev.empty());
}

void budget_evicts_oldest_across_classes() {
  PinnedCache c(1 * MiB);
  std::vector<PinnedCache::Block> ev;
  c.adopt(at(0x1000000), 512 * KiB);
  c.adopt(at(0x2000000), 256 * KiB);
  c.adopt(at(0x3000000), 256 * KiB);
  c.adopt(at(0x4000000), 512 * KiB);
  CHECK(c.put(at(0x1000000), &ev));
  CHECK(c.put(at(0x2000000), &ev));
  CHECK(c.put(at(0x3000000), &ev));
  CHECK(ev.empty());  // exactly the budget
  CHECK(c.put(at(0x4000000), &ev));
  CHECK(ev.size() == 1 && ev[0].ptr == at(0x1000000) && ev[0].bytes == 512 * KiB);
  CHECK(c.stats().cached_bytes == 1 * MiB);
  CHECK(c.take(512 * KiB) == at(0x4000000));
  // trim: oldest first down to keep_bytes.
  auto out = c.trim(256 * KiB);
  CHECK(out.size() == 1 && out[0].ptr == at(0x2000000));
  out = c.trim(0);
  CHECK(out.size() == 1 && out[0].ptr == at(0x3000000));
  CHECK(c.stats().cached_bytes == 0);
  CHECK(c.take(256 * KiB) == nullptr);
  CHECK(!c.put(at(0x2000000), &ev));  // trimmed blocks are forgotten
}

// hides(): all of a cached block, the slack past the bytes asked of a live
// one, nothing else.
void hides_cached_and_slack() {
  PinnedCache c(256 * MiB);
  std::vector<PinnedCache::Block> ev;
  const uintptr_t a = 0x5000000, b = 0x6000000;
  c.adopt(at(a), 1000);  // 4 KiB block, 1000 asked
  c.adopt(at(b), 8192);
  CHECK(!c.hides(at(a), 1000));
  CHECK(c.hides(at(a + 999), 2));
  CHECK(c.hides(at(a + 4000), 1));
  CHECK(!c.hides(at(a + 4096), 100));  // past the block
  CHECK(!c.hides(at(a - 100), 100));   // before it
  CHECK(c.hides(at(a - 100), 2000));   // runs into the slack
  CHECK(!c.hides(at(b), 8192));
  CHECK(c.put(at(b), &ev));
  CHECK(c.hides(at(b + 8191), 1));
  CHECK(c.hides(at(a), SIZE_MAX));  // wraps: clamped, covers both
  CHECK(c.take(8192) == at(b));
  CHECK(!c.hides(at(b), 8192));
}

// 8 threads take, adopt and put fake blocks; a block is never live twice.
void threads_never_share_a_block() {
  PinnedCache c(8 * MiB);
  constexpr int kThreads = 8, kRounds = 20000;
  constexpr uintptr_t kSpan = 1u << 24;  // fresh addresses per thread, 16 MiB apart
  std::vector<std::atomic<int>> owner(kThreads * 4096);
  auto slot = [&](void* p) -> std::atomic<int>& {
    const uintptr_t a = reinterpret_cast<uintptr_t>(p);
    return owner[(a / kSpan - 1) * 4096 + (a % kSpan) / 4096 % 4096];
  };
  std::atomic<uintptr_t> next[kThreads];
  for (int t = 0; t < kThreads; ++t) next[t] = (t + 1) * kSpan;
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      const size_t sizes[] = {4096, 12 * KiB, 64 * KiB};
      std::vector<void*> held;
      for (int i = 0; i < kRounds; ++i) {
        const size_t bytes = sizes[i % 3];
        if (held.size() < 3 && (i % 5) != 4) {
          void* p = c.take(bytes);
          if (p == nullptr) {
            p = at(next[t].fetch_add(64 * KiB));
            if (reinterpret_cast<uintptr_t>(p) >= static_cast<uintptr_t>(t + 2) * kSpan) continue;
            c.adopt(p, bytes);
          }
          CHECK(slot(p).exchange(1) == 0);
          held.push_back(p);
        } else if (!held.empty()) {
          void* p = held.back();
          held.pop_back();
          CHECK(slot(p).exchange(0) == 1);
          std::vector<PinnedCache::Block> ev;
          CHECK(c.put(p, &ev));
        }
      }
    });
  }
  for (auto& th : ts) th.join();
  CHECK(c.stats().cached_bytes <= 8 * MiB);
}

}  // namespace

int main() {
  const struct {
    const char* name;
    void (*fn)();
  } cases[] = {
      {"size_classes", size_classes},
      {"block_bytes_and_bypass", block_bytes_and_bypass},
      {"reuse_by_class_newest_first", reuse_by_class_newest_first},
      {"budget_evicts_oldest_across_classes", budget_evicts_oldest_across_classes},
      {"hides_cached_and_slack", hides_cached_and_slack},
      {"threads_never_share_a_block", threads_never_share_a_block},
  };
  for (const auto& c : cases) {
    const int before = core_check::failures.load();
    c.fn();
    std::printf("%s %s\n", core_check::failures.load() == before ? "ok  " : "FAIL", c.name);
  }
  return core_check::failures.load() == 0 ? 0 : 1;
}
