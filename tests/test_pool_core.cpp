// The caching pool class on its own (src/core/pool), compiled into this
// program with a fake chunk source whose events complete when the test says
// so. Plain checks: every failure prints its line; the exit status is 1 when
// any check failed, 0 otherwise. Usage: test_pool_core [CASE]
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstring>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "backend/error.hpp"
#include "core/pool/caching_pool.hpp"
#include "core/pool/reuse_bins.hpp"
#include "core/pool/size_class.hpp"
#include "core_check.hpp"
#include "fake_chunk_source.hpp"
#include "pool_by_address.hpp"

using namespace metrale::core::pool;
using pooltest::FakeChunkSource;
using pooltest::PoolByAddress;

namespace {


constexpr size_t KiB = 1024, MiB = 1024 * 1024;
constexpr StreamId S1 = 0x100, S2 = 0x200, S3 = 0x300;

void rounding() {
  CHECK_EQ(round_size(0), 512u);
  CHECK_EQ(round_size(1), 512u);
  CHECK_EQ(round_size(512), 512u);
  CHECK_EQ(round_size(513), 1024u);
  CHECK_EQ(round_size(MiB - 1), MiB);
  CHECK(is_small(MiB));
  CHECK(!is_small(MiB + 512));
  CHECK_EQ(chunk_size_for(512), 2 * MiB);
  CHECK_EQ(chunk_size_for(MiB), 2 * MiB);
  CHECK_EQ(chunk_size_for(MiB + 512), 20 * MiB);
  CHECK_EQ(chunk_size_for(10 * MiB - 512), 20 * MiB);
  CHECK_EQ(chunk_size_for(10 * MiB), 10 * MiB);
  CHECK_EQ(chunk_size_for(10 * MiB + 512), 12 * MiB);
  CHECK(should_split(2 * MiB, 512));
  CHECK(!should_split(1024, 1024));
  CHECK(!should_split(20 * MiB, 19 * MiB));  // 1 MiB left: not above 1 MiB
  CHECK(should_split(20 * MiB, 19 * MiB - 512));
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(0, S1);
  const DevPtr b = pool.allocate(1, S1);
  CHECK(a != b);
  CHECK_EQ(b - a, 512u);
  CHECK_EQ(pool.block_size(a), 512u);
  CHECK_EQ(pool.stats().requested, 1u);
  bool threw = false;
  try {
    pool.allocate(~size_t{0}, S1);
  } catch (const metrale::Error& e) {
    threw = e.status() == METRALE_ERROR_OUT_OF_MEMORY;
  }
  CHECK(threw);
}

void same_stream_reuse() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(1000, S1);
  CHECK(pool.free(a));
  CHECK(!pool.free(a));  // twice: refused
  const DevPtr b = pool.allocate(1000, S1);
  CHECK_EQ(b, a);
  CHECK_EQ(src.allocs, 1u);
  CHECK_EQ(src.records, 0u);  // no event on the same-stream path
  // A freed large block too, with its events still incomplete.
  const DevPtr l = pool.allocate(30 * MiB, S1);
  src.auto_complete = false;
  pool.allocate(1, S2);  // S2 looks at S1's free blocks: S1 gets an event
  CHECK(pool.free(l));
  CHECK_EQ(pool.allocate(30 * MiB, S1), l);
}

// Fills what is left of the current small chunk of `s` with 1 MiB blocks.
void cross_stream() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S1);
  const DevPtr a2 = pool.allocate(MiB, S1);  // the chunk is full
  CHECK_EQ(a2, a + MiB);
  CHECK(pool.free(a));
  const DevPtr b = pool.allocate(MiB, S2);  // a is not ready for S2
  CHECK(b != a);
  CHECK_EQ(src.allocs, 2u);
  CHECK_EQ(src.records, 1u);  // an event on S1, covering a's free
  CHECK_EQ(src.incomplete(), 1u);
  const DevPtr b2 = pool.allocate(MiB, S2);
  CHECK_EQ(b2, b + MiB);
  const DevPtr c = pool.allocate(MiB, S2);  // still not ready: a third chunk
  CHECK(c != a);
  CHECK_EQ(src.allocs, 3u);
  CHECK_EQ(src.records, 1u);  // no second event: nothing freed since
  pool.allocate(MiB, S2);     // the third chunk is full
  src.complete_stream(S2);    // the wrong stream's events: still not ready
  CHECK(pool.allocate(MiB, S2) != a);
  CHECK_EQ(src.allocs, 4u);
  pool.allocate(MiB, S2);
  src.complete_stream(S1);
  CHECK_EQ(pool.allocate(MiB, S2), a);  // ready: reused
  CHECK_EQ(src.allocs, 4u);
  // A block freed on S2 that was taken from S1 belongs to S2 now.
  CHECK(pool.free(a));
  CHECK_EQ(pool.allocate(MiB, S2), a);
  // free_on: a block allocated on S1 and freed on S3 stays S1's, pending
  // an event on S3: neither S3 nor S1 takes it before that event is done.
  const uint64_t records = src.records;
  const DevPtr d = pool.allocate(30 * MiB, S1);
  CHECK(pool.free_on(d, S3));
  CHECK_EQ(src.records, records + 1);  // the event on S3
  CHECK(pool.allocate(30 * MiB, S3) != d);
  CHECK(pool.allocate(30 * MiB, S1) != d);
  src.complete_stream(S3);
  CHECK_EQ(pool.allocate(30 * MiB, S1), d);
}

// An event covers the frees before its record only: a later free on the
// same stream waits for a later event.
void event_covers_earlier_frees_only() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(12 * MiB, S1);  // a 12 MiB chunk each
  const DevPtr c = pool.allocate(12 * MiB, S1);
  CHECK(pool.free(a));
  CHECK(pool.allocate(12 * MiB, S2) != a);  // records E1 on S1, covering a
  CHECK_EQ(src.records, 1u);
  CHECK(pool.free(c));
  src.complete_all();                        // E1 done; c's free is after it
  CHECK_EQ(pool.allocate(12 * MiB, S2), a);
  const DevPtr d = pool.allocate(12 * MiB, S2);
  CHECK(d != c);
  CHECK_EQ(src.allocs, 4u);
  CHECK_EQ(src.records, 2u);  // E2 on S1, covering c
  src.complete_all();
  CHECK_EQ(pool.allocate(12 * MiB, S2), c);
}

void record_stream() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S1);
  pool.allocate(MiB, S1);
  CHECK(pool.record_stream(a, S2));
  CHECK(pool.record_stream(a, S3));
  CHECK(pool.record_stream(a, S1));  // its own stream: nothing to wait for
  CHECK(pool.free(a));
  CHECK_EQ(src.records, 2u);  // one event on S2, one on S3, at the free
  CHECK_EQ(pool.stats().blocks_pending, 1u);
  CHECK_EQ(pool.stats().in_use, MiB);
  CHECK(pool.allocate(MiB, S1) != a);  // even S1 must wait for S2 and S3
  pool.allocate(MiB, S1);
  src.complete_stream(S2);
  CHECK(pool.allocate(MiB, S1) != a);  // S3 still running
  pool.allocate(MiB, S1);
  src.complete_stream(S3);
  CHECK_EQ(pool.allocate(MiB, S1), a);
  CHECK_EQ(pool.stats().blocks_pending, 0u);
  CHECK(!pool.record_stream(0x1234, S2));  // not a block of the pool
}

// A free refused with CAPTURE (a stream the block is marked on captures)
// changes nothing: the freeing stream is not added to the block's uses, so
// the later free records no event on it.
void refused_free_changes_nothing() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S1);
  CHECK(pool.record_stream(a, S2));
  src.capturing.insert(S2);
  bool refused = false;
  try {
    pool.free_on(a, S3);
  } catch (const metrale::Error& e) {
    refused = e.status() == METRALE_ERROR_CAPTURE;
  }
  CHECK(refused);
  CHECK_EQ(src.records, 0u);
  src.capturing.erase(S2);
  CHECK(pool.free(a));
  CHECK_EQ(src.records, 1u);  // the event on S2 only, none on S3
}

void split_and_coalesce() {
  const size_t sizes[2] = {512 * KiB, 4 * MiB};
  for (size_t sz : sizes) {
    const size_t chunk = chunk_size_for(sz);
    int order[3] = {0, 1, 2};
    do {
      FakeChunkSource src;
      PoolByAddress pool(src);
      DevPtr p[3];
      for (int i = 0; i < 3; ++i) p[i] = pool.allocate(sz, S1);
      CHECK_EQ(p[1], p[0] + sz);
      CHECK_EQ(p[2], p[1] + sz);
      CHECK_EQ(pool.stats().largest_free, chunk - 3 * sz);
      for (int i : order) CHECK(pool.free(p[i]));
      PoolStats s = pool.stats();
      CHECK_EQ(s.in_use, 0u);
      CHECK_EQ(s.cached, chunk);
      // The frees sit in the reuse bins, uncoalesced: a request that only
      // merged blocks can serve (the whole chunk; 1 MiB, the largest small
      // size, for the small one) empties them into the index, where they
      // merge, and is served without fetching another chunk.
      const DevPtr whole = pool.allocate(is_small(sz) ? kSmallLimit : chunk, S1);
      CHECK_EQ(whole, p[0]);
      CHECK_EQ(src.allocs, 1u);
      CHECK(pool.free(whole));
      // One free block spanning the chunk: a trim gives the chunk back.
      CHECK_EQ(pool.trim(0), chunk);
      CHECK_EQ(src.frees, 1u);
    } while (std::next_permutation(order, order + 3));
  }
  // Blocks of different streams do not merge until the events complete
  // and a trim looks at whole chunks.
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(512 * KiB, S1);
  const DevPtr b = pool.allocate(512 * KiB, S1);
  CHECK(pool.free_on(a, S2));
  CHECK(pool.free_on(b, S1));
  // Binned on their streams, nothing merged: the chunk's untouched 1 MiB is
  // the largest free block.
  CHECK_EQ(pool.stats().largest_free, MiB);
  CHECK_EQ(pool.trim(0), 2 * MiB);  // every block free: the chunk goes
}

void trim() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  // 12 MiB chunk, stays in use; 1 MiB left over is not worth a split, so
  // the block is the whole chunk.
  const DevPtr keep = pool.allocate(11 * MiB, S1);
  CHECK_EQ(pool.block_size(keep), 12 * MiB);
  const DevPtr s = pool.allocate(4 * KiB, S1);   // 2 MiB chunk
  const DevPtr m = pool.allocate(2 * MiB, S1);   // 20 MiB chunk
  const DevPtr l = pool.allocate(64 * MiB, S2);  // 64 MiB chunk
  CHECK_EQ(pool.stats().reserved, 98 * MiB);
  pool.free(s);
  pool.free(m);
  pool.free(l);
  CHECK_EQ(pool.stats().cached, 86 * MiB);
  CHECK_EQ(pool.trim(90 * MiB), 0u);  // already within
  CHECK_EQ(src.frees, 0u);
  CHECK_EQ(pool.trim(25 * MiB), 64 * MiB);  // largest first: one chunk does it
  CHECK_EQ(src.freed_sizes.size(), 1u);
  CHECK_EQ(src.freed_sizes[0], 64 * MiB);
  PoolStats st = pool.stats();
  CHECK_EQ(st.reserved, 34 * MiB);
  CHECK_EQ(st.chunk_frees, 1u);
  CHECK_EQ(pool.trim(0), 22 * MiB);
  CHECK_EQ(src.freed_sizes[1], 20 * MiB);
  CHECK_EQ(src.freed_sizes[2], 2 * MiB);
  st = pool.stats();
  CHECK_EQ(st.reserved, 12 * MiB);
  CHECK_EQ(st.cached, 0u);
  CHECK_EQ(st.in_use, 12 * MiB);
  CHECK_EQ(st.requested, 11 * MiB);
  CHECK_EQ(st.chunk_allocs, 4u);
  CHECK_EQ(st.chunk_frees, 3u);
  // A pending record_stream free is waited for, then released.
  CHECK(pool.record_stream(keep, S3));
  pool.free(keep);
  CHECK_EQ(pool.trim(0), 12 * MiB);
  CHECK_EQ(pool.stats().reserved, 0u);
  CHECK_EQ(src.outstanding, 0u);
  CHECK_EQ(src.bad_frees, 0u);
}

void oom_retry() {
  FakeChunkSource src;
  src.capacity = 42 * MiB;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(12 * MiB, S1);
  pool.free(a);
  CHECK_EQ(pool.stats().cached, 12 * MiB);
  const DevPtr b = pool.allocate(32 * MiB, S2);  // 12 + 32 > 42: release, retry
  CHECK(b != 0);
  PoolStats st = pool.stats();
  CHECK_EQ(st.reserved, 32 * MiB);
  CHECK_EQ(st.in_use, 32 * MiB);
  CHECK_EQ(st.cached, 0u);
  CHECK_EQ(st.chunk_allocs, 2u);
  CHECK_EQ(st.chunk_frees, 1u);
  // The first try fails with nothing released; the frees are waited for
  // without the lock, then the retry fails once more and releases.
  CHECK_EQ(src.failed_allocs, 2u);
  CHECK_EQ(src.waits, 1u);  // S1's free was waited for before its chunk went
  // Nothing cached to give back: OUT_OF_MEMORY, with the figures, no change.
  const DevPtr c = pool.allocate(100 * KiB, S1);  // a 2 MiB chunk: fits
  std::string msg;
  metrale_status_t status = METRALE_OK;
  try {
    pool.allocate(20 * MiB, S1);
  } catch (const metrale::Error& e) {
    status = e.status();
    msg = e.what();
  }
  CHECK_EQ(status, METRALE_ERROR_OUT_OF_MEMORY);
  std::printf("  message: %s\n", msg.c_str());
  const std::string cached = std::to_string(2 * MiB - 100 * KiB) + " bytes cached";
  const std::string used = std::to_string(32 * MiB + 100 * KiB) + " bytes in use";
  CHECK(msg.find(cached) != std::string::npos);
  CHECK(msg.find(used) != std::string::npos);
  st = pool.stats();
  CHECK_EQ(st.reserved, 34 * MiB);  // the small chunk stays: a block is in use
  CHECK_EQ(st.chunk_allocs, 3u);
  CHECK_EQ(st.chunk_frees, 1u);
  CHECK_EQ(src.failed_allocs, 5u);  // the last request: tried three times
  pool.free(c);
  pool.free(b);
  // S2's free of b, known complete once waited for, serves S1's request
  // from its cached block: no chunk released, none fetched.
  const size_t fetched = pool.stats().chunk_allocs;
  CHECK_EQ(pool.allocate(20 * MiB, S1), b);
  CHECK_EQ(pool.stats().reserved, 34 * MiB);
  CHECK_EQ(pool.stats().chunk_allocs, fetched);
}

// A random sequence against a model of what must hold.
void random_model() {
  FakeChunkSource src;
  src.capacity = 1024 * MiB;  // out-of-memory now and then: release, retry, or fail
  PoolByAddress pool(src);
  size_t ooms = 0;
  std::mt19937_64 rng(12345);
  struct Live {
    size_t size, requested;
    StreamId stream;
  };
  std::map<DevPtr, Live> live;
  size_t in_use = 0, requested = 0, peak = 0;
  const StreamId streams[4] = {S1, S2, S3, 0x400};
  auto pick_size = [&]() -> size_t {
    const int r = static_cast<int>(rng() % 100);
    if (r < 70) return rng() % (64 * KiB);
    if (r < 90) return rng() % (2 * MiB);
    if (r < 99) return rng() % (16 * MiB);
    return rng() % (64 * MiB);
  };
  bool exact = true;
  for (int op = 0; op < 100000; ++op) {
    const int r = static_cast<int>(rng() % 100);
    if (r < 50 || live.empty()) {
      const size_t bytes = pick_size();
      const StreamId s = streams[rng() % 4];
      DevPtr p = 0;
      try {
        p = pool.allocate(bytes, s);
      } catch (const metrale::Error& e) {
        if (e.status() != METRALE_ERROR_OUT_OF_MEMORY) exact = false;
        ++ooms;  // nothing handed out; the cache may have been released
      }
      if (p == 0) {
        if (pool.stats().blocks_in_use != live.size()) exact = false;
        continue;
      }
      // Rounded, or a whole large block when the rest was not worth a split.
      const size_t sz = pool.block_size(p);
      if (sz < round_size(bytes) ||
          (sz != round_size(bytes) && (is_small(sz) || sz - round_size(bytes) > kLargeMinRemainder)))
        exact = false;
      // No overlap with a live block.
      auto it = live.lower_bound(p);
      if (it != live.end() && it->first < p + sz) exact = false;
      if (it != live.begin() && std::prev(it)->first + std::prev(it)->second.size > p)
        exact = false;
      live[p] = {sz, bytes, s};
      in_use += sz;
      requested += bytes;
      peak = std::max(peak, in_use);
    } else if (r < 90) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % std::min<size_t>(live.size(), 64)));
      bool ok;
      if (rng() % 4 == 0) {
        ok = pool.free_on(it->first, streams[rng() % 4]);
      } else {
        ok = pool.free(it->first);
      }
      if (!ok) exact = false;
      in_use -= it->second.size;
      requested -= it->second.requested;
      live.erase(it);
    } else if (r < 95) {
      auto it = live.begin();
      std::advance(it, static_cast<long>(rng() % std::min<size_t>(live.size(), 64)));
      if (!pool.record_stream(it->first, streams[rng() % 4])) exact = false;
    } else if (r < 99) {
      src.complete_stream(streams[rng() % 4]);
    } else {
      pool.trim(rng() % (64 * MiB));
    }
    const PoolStats st = pool.stats();
    if (st.in_use != in_use || st.requested != requested || st.peak_in_use != peak ||
        st.blocks_in_use != live.size() || st.reserved != src.outstanding ||
        st.cached != st.reserved - st.in_use || st.chunk_allocs != src.allocs ||
        st.chunk_frees != src.frees || st.largest_free > st.cached) {
      if (exact) std::printf("  stats differ from the model at op %d\n", op);
      exact = false;
    }
    if (!exact) break;
  }
  CHECK(exact);
  std::printf("  %zu allocations refused (out of memory), %llu chunks fetched, %llu given back\n",
              ooms, (unsigned long long)src.allocs, (unsigned long long)src.frees);
  CHECK(ooms > 0);
  for (auto& kv : live) pool.free(kv.first);
  pool.trim(0);
  const PoolStats st = pool.stats();
  CHECK_EQ(st.reserved, 0u);
  CHECK_EQ(st.in_use, 0u);
  CHECK_EQ(st.requested, 0u);
  CHECK_EQ(src.outstanding, 0u);
  CHECK_EQ(src.bad_frees, 0u);
  CHECK(src.allocs > 10);
}
// Retiring a stream whose wait fails (a lost device) still forgets it: the
// caller destroys the stream next, and a block marked on it must not keep
// its handle (on cuda a later query of it reached the driver with a freed
// stream). Observable: with the dead handle's value reused by a capturing
// stream, a free of the block is refused with CAPTURE only if the mark
// stayed.
void retire_forgets_a_stream_whose_wait_fails() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S1);
  CHECK(pool.record_stream(a, S2));
  src.fail_waits = true;
  bool threw = false;
  try {
    pool.retire_stream(S2, S1);
  } catch (const metrale::Error& e) {
    threw = e.status() == METRALE_ERROR_CONTEXT_LOST;
  }
  CHECK(threw);  // the failure still reaches the caller
  src.fail_waits = false;
  src.capturing.insert(S2);  // a new stream with the old handle, capturing
  CHECK(pool.free(a));
  // The retirement's events on S2 only (the one waited for without the
  // pool's lock, then its own): none at the free.
  CHECK_EQ(src.records, 2u);
}

// A call that raced its stream's destroy (it took the handle before the
// retirement, the lock after) must not bring the dead handle back: later
// calls would hand it to the backend. Refused until a new stream is born
// with the same value (backends may reuse it).
void retired_stream_stays_retired() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S1);
  pool.retire_stream(S2, S1);
  const auto status_of = [](auto&& call) {
    try {
      call();
    } catch (const metrale::Error& e) {
      return e.status();
    }
    return METRALE_OK;
  };
  CHECK_EQ(status_of([&] { pool.allocate(KiB, S2); }), METRALE_ERROR_INVALID_ARGUMENT);
  // A use or a free on it is complete (the retirement waited for its work):
  // done, with nothing kept that names it. A free that failed here would
  // leave its caller's ledger entry taken and the block lost.
  CHECK(pool.record_stream(a, S2));
  CHECK(pool.free_on(a, S2));
  CHECK_EQ(pool.stats().blocks_in_use, 0u);
  const size_t reserved = pool.stats().reserved;
  CHECK_EQ(pool.trim(0), reserved);  // given back
  for (const auto& kv : src.events) CHECK(kv.second.stream != S2);  // no event on S2
  pool.stream_born(S2);
  const DevPtr b = pool.allocate(KiB, S2);
  CHECK(b != 0);
  CHECK(pool.free(b));
}

// The wait of a trim ends after the stream it covered was destroyed and a
// new stream got its handle value: the old stream's completed event must
// not mark the new stream's frees complete (a chunk one of them is still
// in use on would be given back).
void settle_skips_a_stream_made_again_meanwhile() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(MiB, S2);
  CHECK(pool.free(a));  // S2's free 1, not known complete
  DevPtr b = 0;
  src.during_wait = [&] {
    pool.retire_stream(S2, S1);  // a's block goes to S1, complete
    pool.stream_born(S2);
    b = pool.allocate(MiB, S2);  // the new S2's: from that same chunk
    CHECK(pool.free(b));         // its free 1, not complete
  };
  pool.trim(0);
  CHECK(b != 0);
  CHECK(pool.stats().reserved > 0);  // b's chunk stays: its free is pending
  src.complete_all();
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved, 0u);
}

// A stream's retirement waits for its work without the pool's lock (the
// work may be a host kernel that allocates): a free and a use made on it by
// calls racing the destroy during that wait take another unlocked round,
// and are still covered before its blocks count as complete.
void retirement_waits_unlocked_for_frees_made_meanwhile() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  src.pool_lock = &pool.lock();
  const DevPtr a = pool.allocate(MiB, S2);
  const DevPtr c = pool.allocate(KiB, S1);
  CHECK(pool.free(a));  // S2's free 1, not known complete
  DevPtr b = 0;
  src.during_wait = [&] {
    b = pool.allocate(MiB, S2);  // a racing call's block, freed on S2
    CHECK(pool.free(b));
    CHECK(pool.record_stream(c, S2));  // and a use of S1's block there
  };
  pool.retire_stream(S2, S1);
  CHECK_EQ(src.waits_locked, 0u);
  CHECK(src.waits >= 2u);       // a second round covered the racing free
  CHECK(src.incomplete() == 0u);
  CHECK(pool.free(c));          // its S2 use went with S2: no event left to wait for
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved, 0u);  // every chunk back: all complete
  CHECK_EQ(src.frees, src.allocs);
}

// Calls racing a destroy that keep freeing on the stream during every one
// of the retirement's unlocked waits: the retirement is put off (INVALID_
// ARGUMENT, nothing retired) rather than waited for with the lock held, and
// a later retirement finishes it.
void retirement_of_a_stream_kept_busy_is_put_off() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  src.pool_lock = &pool.lock();
  CHECK(pool.free(pool.allocate(KiB, S2)));
  int frees = 0;
  std::function<void()> racing = [&] {
    CHECK(pool.free(pool.allocate(KiB, S2)));
    if (++frees < 100) src.during_wait = racing;  // again at the next wait
  };
  src.during_wait = racing;
  bool put_off = false;
  try {
    pool.retire_stream(S2, S1);
  } catch (const metrale::Error& e) {
    put_off = e.status() == METRALE_ERROR_INVALID_ARGUMENT;
  }
  CHECK(put_off);
  CHECK_EQ(src.waits_locked, 0u);
  src.during_wait = nullptr;
  const DevPtr a = pool.allocate(KiB, S2);  // not retired: S2 still serves
  CHECK(a != 0);
  CHECK(pool.free(a));
  pool.retire_stream(S2, S1);  // quiet now: retired
  CHECK_EQ(src.waits_locked, 0u);
  bool refused = false;
  try {
    pool.allocate(KiB, S2);
  } catch (const metrale::Error& e) {
    refused = e.status() == METRALE_ERROR_INVALID_ARGUMENT;
  }
  CHECK(refused);
  pool.trim(0);
  CHECK_EQ(pool.stats().reserved, 0u);
}

// The out-of-memory retry waits for frees without the pool's lock, also for
// frees another thread made during its first wait (one more round).
void oom_retry_waits_unlocked_for_frees_made_meanwhile() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  src.pool_lock = &pool.lock();
  src.capacity = 4 * MiB;  // two 2 MiB chunks
  const DevPtr a = pool.allocate(MiB, S1), b = pool.allocate(MiB, S1);  // chunk 1
  const DevPtr c = pool.allocate(MiB, S2), d = pool.allocate(MiB, S2);  // chunk 2
  CHECK_EQ(src.allocs, 2u);
  CHECK(pool.free(a));
  CHECK(pool.free(b));
  CHECK(pool.free(c));  // none known complete
  src.during_wait = [&] { CHECK(pool.free(d)); };  // another thread's, meanwhile
  // Past any chunk the capacity allows (20 MiB): OUT_OF_MEMORY, after a
  // second round gave back the chunk d's free emptied during the first.
  bool oom = false;
  try {
    pool.allocate(3 * MiB, S3);
  } catch (const metrale::Error& e) {
    oom = e.status() == METRALE_ERROR_OUT_OF_MEMORY;
  }
  CHECK(oom);
  CHECK_EQ(src.waits_locked, 0u);
  CHECK_EQ(pool.stats().reserved, 0u);
}

// A free naming a stream retired meanwhile never asks the source about it
// (its backend handle may be gone) and succeeds as complete.
void free_on_a_retired_stream_never_asks_about_it() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(KiB, S1);
  pool.stream_born(S2);
  pool.retire_stream(S2, S1);
  src.capturing.insert(S2);  // a query would answer "capturing": CAPTURE
  CHECK(pool.free_on(a, S2));
  CHECK_EQ(pool.stats().in_use, 0u);
  // Nor does a list that took a block before the retirement make the dead
  // stream the block's own (its free would be refused, the block lost).
  const DevPtr b = pool.allocate(KiB, S1);
  pool.set_stream(b, S2);
  CHECK(pool.free_on(b, S2));
  CHECK_EQ(pool.stats().in_use, 0u);
}

// A chunk cut between two streams: once both owners' events are done, the
// free pieces merge and serve a request none of them fits alone, instead
// of a new chunk (the checkerboard that made a training trace's reserved
// bytes grow step after step). Not before: S2's piece may still be in use.
void merge_across_owners() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  const DevPtr a = pool.allocate(8 * MiB, S1);  // a 20 MiB chunk: 8 + 12 free
  const DevPtr b = pool.allocate(9 * MiB, S2);  // S1's fresh 12 MiB: 9 + 3
  CHECK_EQ(b, a + 8 * MiB);
  CHECK_EQ(src.allocs, 1u);
  CHECK(pool.free(b));                           // S2's now
  CHECK(pool.free(a));                           // S1's: 8 | 9 (S2) | 3
  CHECK_EQ(pool.stats().largest_free, 9 * MiB);
  // S2's free is not known complete: its piece stays out of the merge.
  const DevPtr c = pool.allocate(19 * MiB, S1);
  CHECK(c != a);
  CHECK_EQ(src.allocs, 2u);
  CHECK(pool.free(c));
  src.complete_all();
  const DevPtr d = pool.allocate(19 * MiB, S1);
  CHECK(d == a || d == c);
  CHECK_EQ(src.allocs, 2u);
  CHECK(pool.free(d));
  // The merged block is S1's and known complete: S3 may take it at once.
  src.complete_all();
  CHECK(pool.allocate(20 * MiB, S3) != 0);
  CHECK_EQ(src.allocs, 2u);
}

// A large request that misses its exact bin first merges the stream's
// binned blocks: two freed 4 MiB neighbours make the 8 MiB asked, and the
// whole 16 MiB block elsewhere stays whole (it used to be split, which made
// a training trace's pool grow step after step).
void large_miss_merges_bins_first() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  DevPtr p[5];
  for (DevPtr& x : p) x = pool.allocate(4 * MiB, S1);  // one 20 MiB chunk, full
  CHECK_EQ(p[1], p[0] + 4 * MiB);
  const DevPtr other = pool.allocate(4 * MiB, S1);      // a second chunk: 4 + 16 free
  CHECK_EQ(src.allocs, 2u);
  CHECK(pool.free(p[1]));
  CHECK(pool.free(p[2]));                               // both binned, not merged
  CHECK_EQ(pool.allocate(8 * MiB, S1), p[1]);
  CHECK_EQ(pool.stats().largest_free, 16 * MiB);
  CHECK_EQ(src.allocs, 2u);
  (void)other;
}

void threads() {
  FakeChunkSource src;
  PoolByAddress pool(src);
  constexpr int kThreads = 16, kOps = 20000;
  std::atomic<bool> stop{false};
  std::thread completer([&] {
    while (!stop.load()) {
      src.complete_all();
      std::this_thread::yield();
    }
  });
  std::atomic<uint64_t> allocated{0}, freed{0};
  std::vector<std::thread> ts;
  for (int t = 0; t < kThreads; ++t) {
    ts.emplace_back([&, t] {
      std::mt19937_64 rng(static_cast<uint64_t>(t) + 1);
      const StreamId mine = 0x1000 + static_cast<StreamId>(t);
      std::vector<DevPtr> held;
      for (int i = 0; i < kOps; ++i) {
        if (held.size() < 64 && (held.empty() || rng() % 2 == 0)) {
          const size_t bytes = rng() % 8 == 0 ? rng() % (8 * MiB) : rng() % (16 * KiB);
          held.push_back(pool.allocate(bytes, mine));
          allocated.fetch_add(1);
        } else {
          const size_t k = rng() % held.size();
          if (rng() % 8 == 0) pool.record_stream(held[k], 0x1000 + rng() % kThreads);
          const bool ok = rng() % 4 == 0 ? pool.free_on(held[k], 0x1000 + rng() % kThreads)
                                         : pool.free(held[k]);
          if (!ok) core_check::failures.fetch_add(1);
          held[k] = held.back();
          held.pop_back();
          freed.fetch_add(1);
        }
      }
      for (DevPtr p : held) {
        if (!pool.free(p)) core_check::failures.fetch_add(1);
        freed.fetch_add(1);
      }
    });
  }
  for (auto& t : ts) t.join();
  stop = true;
  completer.join();
  CHECK_EQ(allocated.load(), freed.load());
  PoolStats st = pool.stats();
  CHECK_EQ(st.in_use, 0u);
  CHECK_EQ(st.requested, 0u);
  CHECK_EQ(st.blocks_in_use, 0u);
  CHECK_EQ(st.reserved, src.outstanding);
  CHECK_EQ(st.cached, st.reserved);
  CHECK_EQ(st.chunk_allocs, src.allocs);
  pool.trim(0);
  st = pool.stats();
  CHECK_EQ(st.reserved, 0u);
  CHECK_EQ(st.blocks_pending, 0u);
  CHECK_EQ(src.outstanding, 0u);
  CHECK_EQ(src.bad_frees, 0u);
}

// The bins alone: drain and largest() read a bitmap of the small bins in
// use, so every put, take and drain must keep it right, across its words
// (bins 0, 63, 64 and 2047 sit at word edges) and next to the large bins.
void reuse_bins_bitmap() {
  const size_t sizes[] = {512, 64 * 512, 65 * 512, 128 * 512, MiB, 2 * MiB};
  std::vector<Block> blocks(2 * std::size(sizes));
  ReuseBins bins;
  CHECK(bins.empty());
  CHECK_EQ(bins.largest(), 0u);
  for (size_t i = 0; i < blocks.size(); ++i) {
    blocks[i].size = sizes[i % std::size(sizes)];
    CHECK(bins.put(&blocks[i]));
  }
  CHECK_EQ(bins.largest(), 2 * MiB);
  // Emptying a bin, large or small, takes it out of largest().
  CHECK(bins.take(2 * MiB) != nullptr);
  CHECK(bins.take(2 * MiB) != nullptr);
  CHECK(bins.take(2 * MiB) == nullptr);
  CHECK_EQ(bins.largest(), MiB);
  CHECK(bins.take(MiB) != nullptr);
  CHECK_EQ(bins.largest(), MiB);  // its second block is still there
  CHECK(bins.take(MiB) != nullptr);
  CHECK_EQ(bins.largest(), 128 * 512u);
  CHECK(bins.take(128 * 512) != nullptr);
  CHECK(bins.take(128 * 512) != nullptr);
  CHECK_EQ(bins.largest(), 65 * 512u);
  // Refilled after emptying: seen again.
  blocks[4].bin_next = nullptr;
  CHECK(bins.put(&blocks[4]));  // blocks[4] is 1 MiB
  CHECK_EQ(bins.largest(), MiB);
  // A drain hands every binned block once, and leaves nothing behind.
  std::map<const Block*, int> seen;
  bins.drain([&](Block* b) { ++seen[b]; });
  CHECK_EQ(seen.size(), 7u);  // 512, 32 KiB and 32.5 KiB twice each, one 1 MiB
  for (const auto& kv : seen) CHECK_EQ(kv.second, 1);
  CHECK(seen.count(&blocks[4]) == 1);
  CHECK(bins.empty());
  CHECK_EQ(bins.largest(), 0u);
  for (size_t s : sizes) CHECK(bins.take(s) == nullptr);
  // And the bitmap starts again from nothing.
  blocks[1].bin_next = nullptr;
  CHECK(bins.put(&blocks[1]));
  CHECK_EQ(bins.largest(), 64 * 512u);
  seen.clear();
  bins.drain([&](Block* b) { ++seen[b]; });
  CHECK_EQ(seen.size(), 1u);
  CHECK(seen.count(&blocks[1]) == 1);
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"rounding", rounding},
      {"same_stream_reuse", same_stream_reuse},
      {"cross_stream", cross_stream},
      {"event_covers_earlier_frees_only", event_covers_earlier_frees_only},
      {"record_stream", record_stream},
      {"refused_free_changes_nothing", refused_free_changes_nothing},
      {"retire_forgets_a_stream_whose_wait_fails", retire_forgets_a_stream_whose_wait_fails},
      {"retired_stream_stays_retired", retired_stream_stays_retired},
      {"settle_skips_a_stream_made_again_meanwhile", settle_skips_a_stream_made_again_meanwhile},
      {"retirement_waits_unlocked_for_frees_made_meanwhile",
       retirement_waits_unlocked_for_frees_made_meanwhile},
      {"retirement_of_a_stream_kept_busy_is_put_off", retirement_of_a_stream_kept_busy_is_put_off},
      {"oom_retry_waits_unlocked_for_frees_made_meanwhile",
       oom_retry_waits_unlocked_for_frees_made_meanwhile},
      {"free_on_a_retired_stream_never_asks_about_it", free_on_a_retired_stream_never_asks_about_it},
      {"split_and_coalesce", split_and_coalesce},
      {"merge_across_owners", merge_across_owners},
      {"large_miss_merges_bins_first", large_miss_merges_bins_first},
      {"reuse_bins_bitmap", reuse_bins_bitmap},
      {"trim", trim},
      {"oom_retry", oom_retry},
      {"random_model", random_model},
      {"threads", threads},
  });
}
