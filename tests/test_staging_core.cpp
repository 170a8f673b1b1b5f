// The staging pipeline on its own (src/core/staging), compiled into this
// program over a fake device whose DMAs run late: a copy op reads and writes
// its memory only when someone waits for an event recorded after it (or at
// drain()), as a GPU's copy engine would. The host backend runs every copy
// at enqueue and so would hide a missing wait; this fake does not. Plain
// checks: every failure prints its line; exit status 1 when any failed.
// Usage: test_staging_core [CASE]
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "backend/error.hpp"
#include "core/staging/copy_workers.hpp"
#include "core/staging/staged_copy.hpp"
#include "core/staging/staging_ring.hpp"
#include "core_check.hpp"

using namespace metrale::core::staging;

namespace {


// Device memory is one vector; a DevPtr is an offset into it plus kBase.
// One queue of ops for all streams (a single copy engine, in order).
class LateDevice final : public StagingDevice {
 public:
  static constexpr DevPtr kBase = 0x10000;
  explicit LateDevice(size_t device_bytes) : mem(device_bytes) {}
  ~LateDevice() override {
    for (void* p : live) ::operator delete(p);
  }

  void* alloc_pinned(size_t bytes) override {
    if (fail_alloc_at != 0 && ++allocs == fail_alloc_at) {
      metrale::fail(METRALE_ERROR_OUT_OF_MEMORY, "fake: no pinned memory");
    }
    void* p = ::operator new(bytes);
    live.insert(p);
    return p;
  }
  void free_pinned(void* p) override {
    // Freed while a queued DMA still uses it: the bug release() must avoid.
    for (const Op& op : queue)
      if (op.uses == p) freed_with_pending_dma = true;
    live.erase(p);
    ::operator delete(p);
  }
  EventHandle event_create() override {
    done.push_back(false);
    ++events_live;
    return done.size();  // 1-based
  }
  void event_destroy(EventHandle) override { --events_live; }
  void event_record(EventHandle e, StreamHandle) override {
    done[e - 1] = false;
    queue.push_back({[this, e] { done[e - 1] = true; }, nullptr});
  }
  void event_synchronize(EventHandle e) override {
    if (fail_sync) metrale::fail(METRALE_ERROR_DRIVER, "fake: cuEventSynchronize failed (700)");
    while (!done[e - 1] && !queue.empty()) step();
  }
  void h2d(DevPtr dst, const void* src, size_t bytes, StreamHandle) override {
    if (fail_dma_at != 0 && ++dmas == fail_dma_at) {
      metrale::fail(METRALE_ERROR_DRIVER, "fake: cuMemcpyHtoDAsync failed (999)");
    }
    h2d_sizes.push_back(bytes);
    // The staging buffer as it is when the DMA is enqueued: a real copy
    // engine may read it at any moment from now on, so it must not change
    // before the DMA runs (a write still in progress would be a torn copy).
    auto enqueued = std::make_shared<std::vector<unsigned char>>(
        static_cast<const unsigned char*>(src), static_cast<const unsigned char*>(src) + bytes);
    queue.push_back({[=] {
                       if (std::memcmp(src, enqueued->data(), bytes) != 0) changed_under_dma = true;
                       std::memcpy(&mem[dst - kBase], src, bytes);
                     },
                     src});
  }
  void d2h(void* dst, DevPtr src, size_t bytes, StreamHandle) override {
    d2h_sizes.push_back(bytes);
    queue.push_back({[=] { std::memcpy(dst, &mem[src - kBase], bytes); }, dst});
  }

  void step() {
    Op op = std::move(queue.front());
    queue.pop_front();
    op.run();
  }
  void drain() {
    while (!queue.empty()) step();
  }

  // A queued op, and the staging buffer it reads or writes (if any).
  struct Op {
    std::function<void()> run;
    const void* uses;
  };
  std::vector<unsigned char> mem;
  std::deque<Op> queue;
  std::vector<bool> done;
  std::set<void*> live;
  int events_live = 0;
  size_t fail_alloc_at = 0, allocs = 0;
  size_t fail_dma_at = 0, dmas = 0;
  std::vector<size_t> h2d_sizes, d2h_sizes;  // every DMA enqueued, in order
  bool fail_sync = false;
  bool freed_with_pending_dma = false;
  bool changed_under_dma = false;  // a buffer written between its DMA's enqueue and run
};

std::vector<unsigned char> random_bytes(size_t n, unsigned seed) {
  std::mt19937 rng(seed);
  std::vector<unsigned char> v(n);
  for (auto& b : v) b = static_cast<unsigned char>(rng());
  return v;
}

// Every size around 1..3 pieces and many, each ring size: h2d into the late
// device, then (without draining first) d2h back, then compare.
void h2d_then_d2h_round_trips() {
  const size_t B = 4096;
  const size_t sizes[] = {1, B - 1, B, B + 1, 2 * B, 3 * B - 1, 7 * B + 13, 40 * B + 1};
  for (StoreMode stores : {StoreMode::kCached, StoreMode::kStreaming})
  for (size_t count : {2, 3, 5}) {
    for (size_t n : sizes) {
      LateDevice dev(n + 64);
      StagingRing ring(B, count);
      CopyWorkers workers(2);
      auto src = random_bytes(n, static_cast<unsigned>(n * count));
      {
        StagingRing::Lease lease = ring.try_take(dev);
        CHECK(lease);
        staged_h2d(lease, workers, dev, LateDevice::kBase + 5, src.data(), n, 1, stores);
        // src may be reused on return: scribble over it before the DMAs run.
        auto kept = src;
        std::memset(src.data(), 0, n);
        std::vector<unsigned char> back(n + 2, 0xCD);
        staged_d2h(lease, workers, dev, back.data() + 1, LateDevice::kBase + 5, n, 1, stores);
        CHECK(std::memcmp(&dev.mem[5], kept.data(), n) == 0);
        CHECK(std::memcmp(back.data() + 1, kept.data(), n) == 0);
        CHECK(back[0] == 0xCD && back[n + 1] == 0xCD);
      }
      ring.release(dev);
      CHECK(!dev.freed_with_pending_dma);
      CHECK(!dev.changed_under_dma);
      CHECK(dev.live.empty());
      CHECK(dev.events_live == 0);
    }
  }
}

// A copy of fewer than `count` buffers goes in `count` pieces (whole pages,
// at least kMinPiece) so that it pipelines; a longer one in whole buffers.
void short_copies_are_cut_in_count_pieces() {
  const size_t MiB = size_t{1} << 20, B = 4 * MiB;
  CHECK(piece_bytes(8 * MiB, B, 8) == MiB);
  CHECK(piece_bytes(8 * MiB + 1, B, 8) == MiB + 4096);
  CHECK(piece_bytes(64 * MiB, B, 8) == B);
  CHECK(piece_bytes(1 * MiB, B, 8) == kMinPiece);
  CHECK(piece_bytes(100, B, 8) == kMinPiece);
  CHECK(piece_bytes(1 * MiB, 4096, 2) == 4096);  // never above a buffer
  CHECK(piece_bytes(100, 4096, 2) == 4096);
  for (size_t n : {8 * MiB + 13, 3 * MiB, 40 * MiB + 1}) {
    LateDevice dev(n);
    StagingRing ring(B, 8);
    CopyWorkers workers(2);
    auto src = random_bytes(n, static_cast<unsigned>(n));
    {
      StagingRing::Lease lease = ring.try_take(dev);
      staged_h2d(lease, workers, dev, LateDevice::kBase, src.data(), n, 1, StoreMode::kStreaming);
      std::vector<unsigned char> back(n);
      staged_d2h(lease, workers, dev, back.data(), LateDevice::kBase, n, 1, StoreMode::kStreaming);
      CHECK(std::memcmp(back.data(), src.data(), n) == 0);
    }
    const size_t piece = piece_bytes(n, B, 8);
    const size_t pieces = (n + piece - 1) / piece;
    CHECK(dev.h2d_sizes.size() == pieces && dev.d2h_sizes.size() == pieces);
    CHECK(n >= 8 * B || pieces == 8 || n < 8 * kMinPiece);
    size_t total = 0;
    for (size_t k : dev.h2d_sizes) total += k;
    CHECK(total == n && dev.h2d_sizes.front() == piece && dev.d2h_sizes == dev.h2d_sizes);
    ring.release(dev);
    CHECK(!dev.changed_under_dma);
  }
}

// An async h2d returns with DMAs still queued; the next copy (another lease)
// must wait for each buffer's event before refilling it.
void in_flight_buffers_are_waited_for() {
  const size_t B = 4096, n = 9 * B + 7;
  LateDevice dev(3 * n);
  StagingRing ring(B, 2);
  CopyWorkers workers(1);
  auto a = random_bytes(n, 1), b = random_bytes(n, 2);
  {
    StagingRing::Lease lease = ring.try_take(dev);
    staged_h2d(lease, workers, dev, LateDevice::kBase, a.data(), n, 1, StorePolicy{}.h2d(n));
  }
  CHECK(!dev.queue.empty());  // the last pieces are still in flight
  {
    StagingRing::Lease lease = ring.try_take(dev);
    staged_h2d(lease, workers, dev, LateDevice::kBase + n, b.data(), n, 2, StorePolicy{}.h2d(n));
  }
  dev.drain();
  CHECK(std::memcmp(&dev.mem[0], a.data(), n) == 0);
  CHECK(std::memcmp(&dev.mem[n], b.data(), n) == 0);
  ring.release(dev);
}

// Teardown with DMAs in flight waits for them before freeing the buffers.
void release_waits_for_dmas() {
  const size_t B = 4096, n = 5 * B;
  LateDevice dev(n);
  StagingRing ring(B, 3);
  CopyWorkers workers(1);
  auto a = random_bytes(n, 3);
  {
    StagingRing::Lease lease = ring.try_take(dev);
    staged_h2d(lease, workers, dev, LateDevice::kBase, a.data(), n, 1, StorePolicy{}.h2d(n));
  }
  CHECK(ring.allocated());
  ring.release(dev);
  CHECK(!dev.freed_with_pending_dma);
  CHECK(!ring.allocated());
  CHECK(dev.live.empty());
  dev.drain();
}

// A failed pinned allocation: no lease, the reason once, everything already
// allocated freed, and the ring stays off (no retry per copy).
void allocation_failure_turns_staging_off() {
  LateDevice dev(16);
  dev.fail_alloc_at = 3;
  StagingRing ring(4096, 4);
  std::string why;
  StagingRing::Lease lease = ring.try_take(dev, &why);
  CHECK(!lease);
  CHECK(why.find("no pinned memory") != std::string::npos);
  CHECK(dev.live.empty());
  CHECK(dev.events_live == 0);
  why.clear();
  const size_t allocs = dev.allocs;
  CHECK(!ring.try_take(dev, &why));
  CHECK(why.empty());
  CHECK(dev.allocs == allocs);
  ring.release(dev);
}

// DMA and wait failures propagate with the driver's message.
void errors_propagate() {
  const size_t B = 4096, n = 6 * B;
  auto a = random_bytes(n, 4);
  {
    LateDevice dev(n);
    dev.fail_dma_at = 3;
    StagingRing ring(B, 2);
    CopyWorkers workers(1);
    StagingRing::Lease lease = ring.try_take(dev);
    std::string what;
    try {
      staged_h2d(lease, workers, dev, LateDevice::kBase, a.data(), n, 1, StorePolicy{}.h2d(n));
    } catch (const metrale::Error& e) {
      what = e.what();
    }
    CHECK(what.find("cuMemcpyHtoDAsync failed (999)") != std::string::npos);
    lease = StagingRing::Lease();
    ring.release(dev);
    CHECK(dev.live.empty());
  }
  {
    LateDevice dev(n);
    StagingRing ring(B, 2);
    CopyWorkers workers(1);
    StagingRing::Lease lease = ring.try_take(dev);
    dev.fail_sync = true;
    std::string what;
    std::vector<unsigned char> out(n);
    try {
      staged_d2h(lease, workers, dev, out.data(), LateDevice::kBase, n, 1, StorePolicy{}.d2h(n));
    } catch (const metrale::Error& e) {
      what = e.what();
    }
    CHECK(what.find("cuEventSynchronize failed (700)") != std::string::npos);
    lease = StagingRing::Lease();
    dev.fail_sync = false;
    ring.release(dev);
    CHECK(dev.live.empty());
  }
}

// One lease at a time: another thread gets an empty one meanwhile.
void one_lease_at_a_time() {
  LateDevice dev(16);
  StagingRing ring(4096, 2);
  {
    StagingRing::Lease held = ring.try_take(dev);
    CHECK(held);
    bool other = true;
    std::thread t([&] { other = static_cast<bool>(ring.try_take(dev)); });
    t.join();
    CHECK(!other);
  }
  CHECK(ring.try_take(dev));
  ring.release(dev);
}

// The workers split any size at any alignment, for 1..8 threads, from
// several callers at once.
void workers_split_copies() {
  const size_t sizes[] = {0, 1, 4095, CopyWorkers::kMinPart * 2 - 1, CopyWorkers::kMinPart * 2,
                          CopyWorkers::kMinPart * 7 + 3, 5 * 1024 * 1024 + 17};
  for (unsigned t : {1u, 2u, 3u, 8u})
  for (StoreMode mode : {StoreMode::kStreaming, StoreMode::kCached}) {
    CopyWorkers w(t);
    CHECK(w.threads() == t);
    for (size_t n : sizes) {
      for (size_t off : {0, 1, 7}) {
        auto src = random_bytes(n + off, static_cast<unsigned>(n + t));
        std::vector<unsigned char> dst(n + off + 2, 0xAB);
        w.copy(dst.data() + 1, src.data() + off, n, mode);
        CHECK(dst[0] == 0xAB && dst[n + 1] == 0xAB);
        CHECK(n == 0 || std::memcmp(dst.data() + 1, src.data() + off, n) == 0);
      }
    }
  }
  CopyWorkers shared(4);
  std::vector<std::thread> callers;
  std::atomic<int> bad{0};
  for (int c = 0; c < 4; ++c) {
    callers.emplace_back([&, c] {
      for (int i = 0; i < 20; ++i) {
        const size_t n = CopyWorkers::kMinPart * 3 + static_cast<size_t>(c * 100 + i);
        auto src = random_bytes(n, static_cast<unsigned>(c * 100 + i));
        std::vector<unsigned char> dst(n);
        shared.copy(dst.data(), src.data(), n, StoreMode::kStreaming);
        if (dst != src) bad.fetch_add(1);
      }
    });
  }
  for (auto& t : callers) t.join();
  CHECK(bad.load() == 0);
}

// A worker that wakes late for one copy (stalled between reading its job
// and claiming, as preemption does) claims no part of the next copy: it
// would copy the old copy's buffers in place of the new one's, and the new
// copy would return with those parts never written.
struct Stall {
  std::mutex mutex;
  std::condition_variable changed;
  int calls = 0;
  bool stalled = false, released = false;
};
Stall* g_stall = nullptr;

void stall_first_claim(uint32_t) {
  Stall& s = *g_stall;
  std::unique_lock<std::mutex> lock(s.mutex);
  if (++s.calls == 1) {
    s.stalled = true;
    s.changed.notify_all();
    s.changed.wait(lock, [&] { return s.released; });
  } else {
    s.changed.notify_all();  // the late claim is over
  }
}

void late_worker_claims_nothing_of_the_next_copy() {
  const size_t n = CopyWorkers::kMinPart * 2;  // the caller and one worker
  CopyWorkers w(2);
  Stall stall;
  g_stall = &stall;
  CopyWorkers::test_before_claim = stall_first_claim;
  auto a = random_bytes(n, 1), c = random_bytes(n, 2);
  std::vector<unsigned char> b(n, 0), d(n, 0);
  {
    CopyWorkers::Run run(w);
    run.start(b.data(), a.data(), n, StoreMode::kCached);
    {
      std::unique_lock<std::mutex> lock(stall.mutex);
      stall.changed.wait(lock, [&] { return stall.stalled; });
    }
    run.finish();  // the caller copies every part of the first copy
    run.start(d.data(), c.data(), n, StoreMode::kCached);
    {
      std::unique_lock<std::mutex> lock(stall.mutex);
      stall.released = true;
      stall.changed.notify_all();
      // The worker tries its late claim, then reads the second job.
      stall.changed.wait(lock, [&] { return stall.calls >= 2; });
    }
    run.finish();
  }
  CopyWorkers::test_before_claim = nullptr;
  CHECK(b == a);
  CHECK(d == c);
}

// The streaming copy writes exactly [dst, dst + n) with src's bytes, for
// every alignment of either side within a line and sizes around its
// thresholds (below 4 lines it is a memcpy; lines, then a tail).
void stream_copy_matches_memcpy() {
  const size_t sizes[] = {0, 1, 15, 63, 64, 255, 256, 257, 319, 4096 + 13, (size_t{1} << 20) + 5};
  for (size_t n : sizes) {
    for (size_t soff = 0; soff < 64; soff += (n > 4096 ? 21 : 1)) {
      for (size_t doff = 0; doff < 64; doff += (n > 4096 ? 13 : 3)) {
        auto src = random_bytes(n + soff, static_cast<unsigned>(n * 131 + soff));
        std::vector<unsigned char> dst(n + doff + 64, 0xC3);
        stream_copy(dst.data() + doff, src.data() + soff, n);
        bool guards = true;
        for (size_t i = 0; i < doff; ++i) guards &= dst[i] == 0xC3;
        for (size_t i = doff + n; i < dst.size(); ++i) guards &= dst[i] == 0xC3;
        CHECK(guards);
        CHECK(n == 0 || std::memcmp(dst.data() + doff, src.data() + soff, n) == 0);
      }
    }
  }
}

// METRALE_STAGING_STORES's three words, and nothing else.
void store_policies_parse() {
  const StoreMode S = StoreMode::kStreaming, C = StoreMode::kCached;
  StorePolicy p{C, S, C};
  CHECK(parse_store_policy("auto", &p));
  CHECK(p == StorePolicy{});
  CHECK(parse_store_policy("streaming", &p));
  CHECK(p == (StorePolicy{S, S, S}));
  CHECK(parse_store_policy("cached", &p));
  CHECK(p == (StorePolicy{C, C, C}));
  for (const char* bad : {"", "Streaming", "cached ", "nt", "1", "AUTO"}) {
    p = StorePolicy{S, C, S};
    CHECK(!parse_store_policy(bad, &p));
    CHECK(p == (StorePolicy{S, C, S}));
  }
  CHECK(!parse_store_policy(nullptr, &p));
}

// "auto": d2h streams at every size; h2d streams below kH2dCachedFrom and
// caches from there (the measured crossing, stream_copy.hpp).
void auto_policy_by_size() {
  const StorePolicy a;
  for (size_t n : {size_t{1}, size_t{8} << 20, kH2dCachedFrom - 1}) {
    CHECK(a.h2d(n) == StoreMode::kStreaming);
    CHECK(a.d2h(n) == StoreMode::kStreaming);
  }
  for (size_t n : {kH2dCachedFrom, size_t{1} << 30, ~size_t{0}}) {
    CHECK(a.h2d(n) == StoreMode::kCached);
    CHECK(a.d2h(n) == StoreMode::kStreaming);
  }
  StorePolicy forced;
  CHECK(parse_store_policy("cached", &forced));
  CHECK(forced.h2d(1) == StoreMode::kCached && forced.d2h(~size_t{0}) == StoreMode::kCached);
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"h2d_then_d2h_round_trips", h2d_then_d2h_round_trips},
      {"short_copies_are_cut_in_count_pieces", short_copies_are_cut_in_count_pieces},
      {"in_flight_buffers_are_waited_for", in_flight_buffers_are_waited_for},
      {"release_waits_for_dmas", release_waits_for_dmas},
      {"allocation_failure_turns_staging_off", allocation_failure_turns_staging_off},
      {"errors_propagate", errors_propagate},
      {"one_lease_at_a_time", one_lease_at_a_time},
      {"workers_split_copies", workers_split_copies},
      {"late_worker_claims_nothing_of_the_next_copy", late_worker_claims_nothing_of_the_next_copy},
      {"stream_copy_matches_memcpy", stream_copy_matches_memcpy},
      {"store_policies_parse", store_policies_parse},
      {"auto_policy_by_size", auto_policy_by_size},
  });
}
