// The stream-ordered caching pool: device memory in blocks cut from chunks
// that a ChunkSource provides, cached on free and handed out again.
//
// - Size classes (size_class.hpp): 512-byte rounding, small blocks from
//   2 MiB chunks, large ones from 20 MiB or own-size chunks.
// - Best fit per stream (free_index.hpp), splitting, and coalescing with
//   free neighbours of the same chunk owned by the same stream.
// - Stream order (stream_state.hpp): a block freed on stream S is reusable at
//   once on S; another stream takes it only once an event on S covering the
//   free has completed (non-blocking query; otherwise a new chunk). A block
//   marked as used on other streams (record_stream) waits, after its free,
//   for an event recorded at the free on each of those streams before it is
//   reusable even on S.
// - trim(keep) and the out-of-memory retry give whole free chunks back,
//   largest first: the fewest source calls reach the goal, and the small
//   2 MiB chunks that serve the frequent small sizes stay cached longest.
//
// Thread safety: every public method is thread-safe. One mutex guards all
// state: the per-stream states, the allocated-block map, the pending list,
// the chunk list and the counters. Source calls (chunk_alloc included) are
// made with it held. The per-stream state is already separate, so a later
// step can give each stream its own lock and keep the global one only for
// chunk fetches, cross-stream takes, trim and stats.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "core/fast_mutex.hpp"
#include "core/pool/block.hpp"
#include "core/pool/chunk_source.hpp"
#include "core/pool/pool_stats.hpp"
#include "core/pool/size_class.hpp"
#include "core/pool/stream_state.hpp"

namespace metrale::core::pool {

class CachingPool {
 public:
  // shared_lock: a mutex the caller also uses for its own bookkeeping (the
  // context passes its ledger's), so that one lock covers a pooled
  // allocation and its ledger entry (allocate_held); nullptr: its own.
  explicit CachingPool(ChunkSource& source, FastMutex* shared_lock = nullptr);
  // Waits for the streams' events and gives every chunk back, blocks still
  // handed out included (reporting them is the ledger's job).
  ~CachingPool();
  CachingPool(const CachingPool&) = delete;
  CachingPool& operator=(const CachingPool&) = delete;

  // A block of at least `bytes` (rounded to 512) usable on `stream`. The
  // caller keeps the Block* (the ledger entry holds it: the pool has no map
  // of its own) and gives it back with free / free_on; b->ptr is the memory.
  // capturing: `stream` is capturing a graph, so its own earlier frees are
  // not ordered before the graph's replays: only blocks whose last use is
  // known complete (or fresh memory) are handed out, and no event is
  // recorded on it.
  // OUT_OF_MEMORY (metrale::Error) when the source has no chunk for it even
  // after the cache was released; the message names the pool's cached and
  // in-use bytes. Nothing is handed out then, but the cache released before
  // the retry stays released (reserved and chunk_frees show it), the one
  // visible trace of a failed call. Other source errors propagate with
  // nothing changed.
  Block* allocate(size_t bytes, StreamId stream, bool capturing = false);
  // allocate / free / free_on / record_stream with lock() already held by
  // the caller. release_cached_on_oom false: a first try, OUT_OF_MEMORY with
  // nothing released (the caller makes room its own way, then retries with
  // allocate, which releases and reports what it released).
  // key: the allocation may take an unchecked block of that size and pad
  // (pad_owners.hpp); any other unchecked block met on the way goes to the
  // sink.
  Block* allocate_held(size_t bytes, StreamId stream, bool capturing = false,
                       bool release_cached_on_oom = true, ReuseKey key = ReuseKey{});
  void free_held(Block* b, StreamId stream) { free_locked(b, stream, PatternRange{}); }
  void free_held(Block* b, StreamId stream, PatternRange pattern) {
    free_locked(b, stream, pattern);
  }
  void record_stream_held(Block* b, StreamId stream);
  FastMutex& lock() const { return mu_; }
  // The fast paths of allocate_held and free_held, inline (lock() held).
  // take_binned_held: a block of exactly the rounded size from the reuse
  // bins of `stream`, nullptr when there is none (then allocate_held).
  [[gnu::always_inline]] Block* take_binned_held(size_t bytes, StreamId stream,
                                                 ReuseKey key = ReuseKey{}) {
    if (bytes > kMaxRequest) return nullptr;
    ReuseBins& bins = state_for(stream).bins();
    for (;;) {
      Block* b = bins.take(round_size(bytes));
      if (b == nullptr) return nullptr;
      if (!b->unchecked() || key.accepts(*b->owners)) [[likely]] return hand_out(b, bytes, stream);
      to_sink(b);  // a pad another size would overwrite: checked first
    }
  }
  // METRALE_REDZONE_REUSE (pad_owners.hpp): where unchecked blocks go.
  void set_unchecked_sink(UncheckedSink* sink) { sink_ = sink; }
  // How many blocks that carry a checked pattern (or wait unchecked) one
  // bin keeps: twice the red-zone check's batch (a batch of one size comes
  // back at once), at least ReuseBins::kMaxPerBinChecked. Before any use.
  void set_checked_bin_cap(size_t batch) {
    const size_t want = batch > (size_t{1} << 20) ? (size_t{1} << 21) : 2 * batch;
    checked_bin_cap_ = static_cast<uint32_t>(
        want > ReuseBins::kMaxPerBinChecked ? want : ReuseBins::kMaxPerBinChecked);
  }
  // Caches the handed-out block b, used on its own stream only and with
  // b->owners naming its owners so far, in its stream's reuse bins with its
  // pattern record, unchecked. false, nothing changed: its bin is full (the
  // caller has its pad checked instead).
  bool bin_unchecked_held(Block* b) {
    StreamState& owner = state_for(b->stream);
    if (!owner.bins().put(b, checked_bin_cap_)) return false;
    release_counts(b);
    b->epoch = owner.next_epoch();
    return true;
  }
  // Every unchecked block of every stream's bins to the sink (a scan, a
  // destroy: their pads are checked now).
  void flush_unchecked();
  // free_own_held: free_held(b, b->stream[, pattern]) of a block used on its
  // own stream only (b->uses empty): into its bins, or its free index when
  // the bin is full. With a pattern: a red-zone check's release, inline.
  void free_own_held(Block* b) {
    StreamState& owner = state_for(b->stream);
    if (b->owners != nullptr) b->owners->count = 0;  // a checked or padless free
    release_counts(b);
    b->epoch = owner.next_epoch();
    if (!owner.bins().put(b)) insert_free(b, owner);
  }
  void free_own_held(Block* b, PatternRange pattern) {
    b->pattern = pattern;
    StreamState& owner = state_for(b->stream);
    if (b->owners != nullptr) b->owners->count = 0;
    release_counts(b);
    b->epoch = owner.next_epoch();
    if (!owner.bins().put(b, bin_cap(b))) insert_free(b, owner);
  }
  // A red-zone check's release of a batch (lock() held; free_own_run.hpp):
  // free_own_held(b, pattern) for the blocks get(from), get(from + 1), ...
  // (each an OwnFree), a run of one size and stream spliced into its bin
  // at once. Stops at the first block used on another stream too or freed
  // on one not its own, and returns its index (n when all went back).
  struct OwnFree {
    Block* b;
    StreamId on;  // the stream it is freed on
    PatternRange pattern;
  };
  template <class Get>
  size_t free_own_run_held(size_t from, size_t n, Get&& get);
  // Frees a handed-out block on the stream it was allocated on.
  // pattern (every free): the caller's word that this range of the block
  // holds the red-zone pattern, checked since its last use
  // (core/pad_verify_ops.cpp); none for anything else.
  void free(Block* b, PatternRange pattern = PatternRange{});
  // Frees a block on `stream`: the caller has ordered every use of the
  // block before this point of `stream` (as with cuMemFreeAsync), except
  // uses on streams marked with record_stream, which get an event each.
  // CAPTURE (nothing changed) when one of those streams is capturing: its
  // event would be recorded into the graph. A failing event record leaves
  // the block handed out, as before.
  void free_on(Block* b, StreamId stream, PatternRange pattern = PatternRange{});
  // A stream marked with record_stream on the handed-out block b (its own
  // stream aside) that is capturing now, or 0: a free of b would be CAPTURE
  // until that capture ends.
  StreamId capturing_use_of(const Block* b) const;
  // Marks a handed-out block as used on `stream` too (like torch's
  // record_stream).
  void record_stream(Block* b, StreamId stream);
  // The streams a handed-out block was marked as used on (its own aside):
  // the quarantine waits for them before it fills the block.
  std::vector<StreamId> uses_of(const Block* b) const;
  // The stream `gone` is about to be destroyed: waits for its frees, hands
  // its cached blocks and the blocks allocated on it to `heir`, and forgets
  // it (a backend may reuse the handle value for a new stream).
  // INVALID_ARGUMENT, nothing retired, when the source refuses the wait (its
  // work waits for this thread) or calls racing the destroy keep freeing on
  // it: call again later.
  void retire_stream(StreamId gone, StreamId heir);
  // A new stream got handle s: a backend may reuse a retired stream's value.
  void stream_born(StreamId s);
  // Gives whole free chunks back, largest first, until at most keep_bytes
  // are cached. Waits for the events of pending frees first. Returns the
  // bytes given back.
  size_t trim(size_t keep_bytes);

  // The stream a handed-out block is ordered on (a free without a stream
  // frees it there), and a change of it (a free on another stream that is
  // carried out later, see ScanFence); a retired stream is not taken.
  StreamId block_stream(const Block* b) const;
  void set_stream(Block* b, StreamId stream);

  PoolStats stats() const;
  PoolStats stats_held() const;  // lock() held: with other figures under it
  // The same without largest_free (left 0), which walks every stream's bins:
  // for readers on a hot path (the event log samples it at every event).
  PoolStats totals() const;
  void reset_peak();

 private:
  // The stream's state, made on first use; the last one is cached (most
  // threads allocate and free on one stream).
  StreamState& state_for(StreamId s) {
    if (last_state_ != nullptr && last_stream_ == s) return *last_state_;
    return state_for_slow(s);
  }
  StreamState& state_for_slow(StreamId s);
  // INVALID_ARGUMENT when s was retired lately: an allocation that raced
  // the retirement (its stream destroyed under it) must not bring the dead
  // handle back into the pool, where later calls would hand it to the
  // backend. (A free or record_stream naming one only skips it: its work
  // is complete.) The newest kRetiredKept retirements are remembered.
  void refuse_retired(StreamId s) const;
  static constexpr size_t kRetiredKept = 4096;
  void remember_retired_held(StreamId s);
  // capturing_use_of with the lock held, `also` (a freeing stream) counted
  // as a use; refuse_: CAPTURE when there is one.
  StreamId capturing_use(const Block* b, StreamId also) const;
  void refuse_capturing_use(const Block* b, StreamId also) const;
  Block* new_block();
  void recycle(Block* b);
  // An event back to spare_events_; destroyed when the list cannot grow
  // (short of host memory). Never throws.
  void spare_event_held(EventId e) noexcept;
  Block* take_from_other_streams(size_t size, bool small, StreamId stream,
                                 StreamState** owner);
  // Frees since the last event on s get one now, unless s captures (an
  // event recorded there would become part of the graph).
  void cover_if_not_capturing(StreamState& s);
  // Empties s's reuse bins into its free index (coalescing them); an
  // unchecked block goes to the sink instead.
  void flush_bins(StreamState& s);
  // An unchecked block out of the bins, handed out to the sink (or, refused,
  // cached without its record).
  void to_sink(Block* b);
  // Before a new chunk is fetched (pool_merge.cpp): free neighbours owned
  // by different streams whose last use is known complete are merged and
  // handed to `stream`. Returns how many blocks were merged away.
  size_t merge_completed(StreamId stream);
  Block* hand_out(Block* b, size_t bytes, StreamId stream) {
    b->state = BlockState::ALLOCATED;
    b->stream = stream;
    b->requested = bytes;
    b->epoch = 0;
    st_.in_use += b->size;
    st_.requested += bytes;
    ++st_.blocks_in_use;
    if (st_.in_use > st_.peak_in_use) st_.peak_in_use = st_.in_use;
    return b;
  }
  // A handed-out block's share of the counters, given back at its free.
  void release_counts(Block* b) {
    st_.in_use -= b->size;
    st_.requested -= b->requested;
    --st_.blocks_in_use;
    b->requested = 0;
  }
  Block* fetch_chunk(size_t size, size_t bytes, bool small, StreamId stream,
                     bool release_cached_on_oom = true);
  Block* split(Block* b, size_t size, StreamState& owner);
  void insert_free(Block* b, StreamState& owner);
  void free_locked(Block* b, StreamId stream, PatternRange pattern);
  // How many blocks of one size a stream's bins keep: more for blocks that
  // carry a checked pattern range. Those come back from a red-zone batch
  // check (core/pad_verify_queue.hpp) many at once, all of one size in the
  // loop that allocates and frees the same shapes; past the usual cap they
  // would coalesce in the free index and lose their record, and every reuse
  // would pay a fill and a stream wait again. They were held back, not
  // reusable, while waiting for the check: binning them keeps no more.
  uint32_t bin_cap(const Block* b) const {
    return b->pattern.known() ? checked_bin_cap_ : ReuseBins::kMaxPerBin;
  }
  void promote_pending(bool wait);
  // Waits until the frees made so far (on `only`, or on every stream, and
  // the pending ones) are known complete, without the lock (call it
  // unlocked); settle_held: the same with the lock held, blocking on the
  // events the pool already has (the pool's destroy only: no other thread
  // calls in then). Streams that capture are skipped, and so are waits the
  // source refuses (a cycle through host kernels): settle then answers
  // false, what they cover staying not known complete.
  bool settle(StreamId only);
  // A stream state, a block's stream or a block's use names s.
  bool names_stream_held(StreamId s) const;
  void settle_held();
  // Frees not known complete on a stream that does not capture, or pending
  // blocks (polls the events in flight; never waits).
  bool unsettled_held();
  // A block was marked as used on `stream` (record_stream, a free on it).
  void note_use_held(StreamId stream);
  [[noreturn]] static void refuse_retirement_now(StreamId gone, const char* why);
  // Gives back whole free chunks whose frees are known complete, until at
  // most keep_bytes stay cached. Never blocks: settle first.
  size_t release_cached(size_t keep_bytes);

  ChunkSource& src_;
  uint32_t checked_bin_cap_ = ReuseBins::kMaxPerBinChecked;
  mutable FastMutex own_mu_;
  FastMutex& mu_;  // own_mu_ or the caller's
  std::unordered_map<StreamId, std::unique_ptr<StreamState>> streams_;
  StreamId last_stream_ = 0;
  StreamState* last_state_ = nullptr;
  std::deque<Block*> pending_;  // free order
  std::vector<std::unique_ptr<Chunk>> chunks_;
  std::deque<Block> block_storage_;
  std::vector<Block*> spare_blocks_;
  std::vector<EventId> spare_events_;  // for record_stream frees and settle
  std::unordered_set<StreamId> retired_;
  std::deque<StreamId> retired_order_;  // oldest first
  uint64_t chunk_serial_ = 0;
  uint64_t state_serial_ = 0;
  PoolStats st_;  // reserved, in_use, requested, peak, chunk counts, blocks
  UncheckedSink* sink_ = nullptr;
};

}  // namespace metrale::core::pool
