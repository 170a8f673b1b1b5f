// The red-zone pattern record of pool blocks (src/core/pool/block.hpp,
// caching_pool.cpp): what a checked range becomes through split, merge,
// free and recycle. The context relies on it to skip a pad fill
// (core/pad_verify_ops.cpp): a record that survives where the layout does
// not prove it would hand out a pad that is not the pattern. Plain checks
// (core_check.hpp) over the fake chunk source; no backend.
#include "core/pool/block.hpp"
#include "core/pool/caching_pool.hpp"
#include "core/pool/free_own_run.hpp"
#include "core_check.hpp"
#include "fake_chunk_source.hpp"

using namespace metrale::core::pool;
using pooltest::FakeChunkSource;

namespace {

constexpr StreamId S1 = 0x100;

void split_math() {
  const PatternRange p{4096, 4608};
  // Split inside the range: the head keeps its part, the rest the other.
  const PatternRange h = head_pattern_after_split(p, 4200);
  CHECK_EQ(h.from, 4096u);
  CHECK_EQ(h.to, 4200u);
  const PatternRange r = rest_pattern_after_split(p, 4200);
  CHECK_EQ(r.from, 0u);
  CHECK_EQ(r.to, 408u);
  // Split before it: the head has none, the rest all of it, shifted.
  CHECK(!head_pattern_after_split(p, 1024).known());
  const PatternRange r2 = rest_pattern_after_split(p, 1024);
  CHECK_EQ(r2.from, 3072u);
  CHECK_EQ(r2.to, 3584u);
  // Split after it: the rest has none.
  CHECK(!rest_pattern_after_split(p, 4608).known());
  CHECK_EQ(head_pattern_after_split(p, 8192).to, 4608u);
  // None stays none.
  CHECK(!head_pattern_after_split(PatternRange{}, 100).known());
  CHECK(!rest_pattern_after_split(PatternRange{}, 100).known());
}

void merge_math() {
  // Touching ranges join.
  PatternRange m = pattern_after_merge(4608, PatternRange{4096, 4608}, PatternRange{0, 100});
  CHECK_EQ(m.from, 4096u);
  CHECK_EQ(m.to, 4708u);
  // Apart: the longer one, back's shifted.
  m = pattern_after_merge(4608, PatternRange{4096, 4200}, PatternRange{10, 400});
  CHECK_EQ(m.from, 4618u);
  CHECK_EQ(m.to, 5008u);
  m = pattern_after_merge(4608, PatternRange{4000, 4608}, PatternRange{10, 20});
  CHECK_EQ(m.from, 4000u);
  // One side unknown: the other.
  m = pattern_after_merge(512, PatternRange{}, PatternRange{0, 64});
  CHECK_EQ(m.from, 512u);
  CHECK(!pattern_after_merge(512, PatternRange{}, PatternRange{}).known());
  CHECK((PatternRange{1, 5}.covers(2, 5)));
  CHECK(!(PatternRange{1, 5}.covers(0, 3)));
  CHECK(!PatternRange{}.covers(0, 0));
}

// The pool keeps a record given at free through binning, and drops it on a
// free without one and on a fresh chunk.
void free_keeps_or_drops() {
  FakeChunkSource src;
  CachingPool pool(src);
  Block* a = pool.allocate(4160, S1);
  CHECK(!a->pattern.known());  // fresh memory
  pool.free(a, PatternRange{4096, 4608});
  Block* b = pool.allocate(4160, S1);
  CHECK(b == a);
  CHECK_EQ(b->pattern.from, 4096u);
  CHECK_EQ(b->pattern.to, 4608u);
  pool.free(b);  // no word from the caller: whatever the owner wrote
  Block* c = pool.allocate(4160, S1);
  CHECK(c == a);
  CHECK(!c->pattern.known());
  pool.free(c);
}

// Coalesced neighbours keep one range; a split at the old boundary gives
// the front block its own range back.
void coalesce_then_split() {
  FakeChunkSource src;
  CachingPool pool(src);
  Block* a = pool.allocate(4160, S1);
  Block* b = pool.allocate(4160, S1);
  CHECK(b->ptr == a->ptr + 4608);
  pool.free(a, PatternRange{4096, 4608});
  pool.free(b, PatternRange{4096, 4608});
  // A large request flushes the bins into the free index (coalescing a, b
  // and the chunk's rest); the next small one splits the merged block.
  Block* c = pool.allocate(2 << 20, S1);
  pool.free(c);
  Block* d = pool.allocate(4160, S1);
  CHECK(d->ptr == a->ptr);
  CHECK_EQ(d->pattern.from, 4096u);
  CHECK_EQ(d->pattern.to, 4608u);
  pool.free(d);
  pool.trim(0);
}

// A split in the pool: the head keeps only what of the range lies in it.
void split_in_pool() {
  FakeChunkSource src;
  CachingPool pool(src);
  Block* a = pool.allocate(9000, S1);  // a 9216-byte block
  pool.free(a, PatternRange{8000, 9216});
  Block* big = pool.allocate(2 << 20, S1);  // flushes the bins: a merges with the rest
  Block* b = pool.allocate(4160, S1);       // the merged block, split
  CHECK(b->ptr == a->ptr);
  CHECK(!b->pattern.known());          // [8000, 9216) lies past its 4608 bytes
  Block* c = pool.allocate(4160, S1);  // the next 4608 bytes: the range's part, shifted
  CHECK(c->ptr == b->ptr + 4608);
  CHECK_EQ(c->pattern.from, 8000u - 4608u);
  CHECK_EQ(c->pattern.to, 4608u);
  pool.free(b);
  pool.free(c);
  pool.free(big);
}

// A red-zone batch back at once (free_own_run_held): the same as
// free_own_held per block in turn. Each block keeps its record, the bin
// hands them out newest first, the counters drop to zero, a block freed on
// another stream stops the run, and the bins' blocks are visible to a
// trim (the bitmap), which then gives the whole chunk back.
void run_goes_back_as_one_by_one() {
  FakeChunkSource src;
  CachingPool pool(src);
  constexpr size_t kRun = 4;
  Block* blocks[kRun + 1];
  for (size_t i = 0; i < kRun; ++i) blocks[i] = pool.allocate(4160, S1);  // 4608 bytes
  blocks[kRun] = pool.allocate(9000, S1);  // another size: a run of its own
  const PatternRange checked{4096, 4608};
  auto own = [&](size_t i) { return CachingPool::OwnFree{blocks[i], S1, checked}; };
  {
    std::lock_guard<metrale::core::FastMutex> lock(pool.lock());
    CHECK_EQ(pool.free_own_run_held(0, kRun + 1, own), kRun + 1);
  }
  CHECK_EQ(pool.stats().in_use, 0u);
  CHECK_EQ(pool.stats().blocks_in_use, 0u);
  for (size_t i = kRun; i-- > 0;) {  // newest first, each with its record
    Block* b = pool.allocate(4160, S1);
    CHECK(b == blocks[i]);
    CHECK_EQ(b->pattern.from, 4096u);
    CHECK_EQ(b->pattern.to, 4608u);
  }
  Block* other = pool.allocate(9000, S1);
  CHECK(other == blocks[kRun]);
  CHECK_EQ(other->pattern.from, 4096u);
  // A block freed on a stream not its own stops the run at its index.
  const StreamId S2 = 0x200;
  auto mixed = [&](size_t i) {
    return CachingPool::OwnFree{blocks[i], i == 2 ? S2 : S1, checked};
  };
  {
    std::lock_guard<metrale::core::FastMutex> lock(pool.lock());
    CHECK_EQ(pool.free_own_run_held(0, kRun + 1, mixed), 2u);
    pool.free_own_held(blocks[2], checked);
    CHECK_EQ(pool.free_own_run_held(3, kRun + 1, mixed), kRun + 1);
  }
  CHECK_EQ(pool.stats().blocks_in_use, 0u);
  CHECK(pool.trim(0) > 0);
  CHECK_EQ(pool.stats().reserved, 0u);  // every binned block was found
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"split_math", split_math},
      {"merge_math", merge_math},
      {"free_keeps_or_drops", free_keeps_or_drops},
      {"coalesce_then_split", coalesce_then_split},
      {"split_in_pool", split_in_pool},
      {"run_goes_back_as_one_by_one", run_goes_back_as_one_by_one},
  });
}
