// Allocation, frees (good and bad), arenas, pinned and registered host memory.
#include <algorithm>
#include <cstring>

#include "fuzz_state.hpp"

namespace fuzz {

namespace {

uint8_t g_registrable[kMaxAlloc];  // the range host_register may pin

// Sizes: mostly small, sometimes zero or far beyond any machine.
size_t pick_alloc_size(Bytes& in) {
  switch (in.pick(8)) {
    case 0: return 0;
    case 1: return SIZE_MAX - in.u8();
    case 2: return (size_t)1 << (50 + in.pick(13));
    case 3: return 1 + in.pick(kMaxAlloc);
    default: return 1 + in.pick(512);
  }
}

// Reads the new allocation's seq and pad back from the ledger.
void fill_from_ledger(State& st, Alloc& a) {
  size_t count = 0;
  expect(metrale_live_allocations(st.ctx, nullptr, 0, &count), want_ok(), "live_allocations size");
  std::vector<metrale_allocation_t> all(count);
  expect(metrale_live_allocations(st.ctx, all.data(), count, &count), want_ok(),
         "live_allocations");
  for (const auto& e : all) {
    if (e.ptr != a.ptr) continue;
    if (e.bytes != a.bytes) violated("ledger size differs from the request", "alloc", METRALE_OK);
    a.seq = e.seq;
    a.pad = e.redzone_bytes;
    return;
  }
  violated("new allocation missing from live_allocations", "alloc", METRALE_OK);
}

void add_alloc(State& st, metrale_devptr_t p, size_t bytes, bool ledger, metrale_alloc_kind_t kind) {
  if (p == 0) violated("OK allocation returned 0", "alloc", METRALE_OK);
  Alloc a;
  a.ptr = p;
  a.bytes = bytes;
  a.ledger = ledger;
  a.kind = kind;
  a.shadow.assign(bytes, 0);
  a.known.assign(bytes, 0);
  if (st.m.stray) a.pad_state = Pad::Unknown;  // reused without a fill, maybe hit
  if (st.m.find_block(p, 1)) violated("allocation overlaps a live one", "alloc", METRALE_OK);
  if (ledger) fill_from_ledger(st, a);
  st.m.allocs.push_back(std::move(a));
  st.m.freed.erase(std::remove(st.m.freed.begin(), st.m.freed.end(), p), st.m.freed.end());
}

void remove_alloc(State& st, size_t i) {
  st.m.note_freed(st.m.allocs[i]);
  st.m.freed.push_back(st.m.allocs[i].ptr);
  if (st.m.freed.size() > 32) st.m.freed.erase(st.m.freed.begin());
  st.m.allocs.erase(st.m.allocs.begin() + static_cast<long>(i));
}

// An index into allocs of the wanted kind, or -1.
long pick_alloc(State& st, Bytes& in, bool ledger) {
  std::vector<size_t> idx;
  for (size_t i = 0; i < st.m.allocs.size(); ++i)
    if (st.m.allocs[i].ledger == ledger) idx.push_back(i);
  if (idx.empty()) return -1;
  return static_cast<long>(idx[in.pick(idx.size())]);
}

void do_alloc(State& st, Bytes& in, bool managed, bool arena) {
  if (st.m.allocs.size() >= 48) return;
  size_t bytes = pick_alloc_size(in);
  metrale_devptr_t p = 0;
  metrale_status_t s;
  Want w;
  if (bytes == 0) w = want_status(METRALE_ERROR_INVALID_ARGUMENT);
  else if (bytes > kMaxAlloc) w = want_fail();  // beyond physical memory: OOM (or INVALID)
  else w = st.m.lost ? want_status(METRALE_ERROR_CONTEXT_LOST) : want_ok();
  if (st.m.lost && bytes != 0) w = want_fail();
  if (arena) {
    s = expect(metrale_alloc_arena(st.ctx, bytes, &p), w, "alloc_arena");
  } else {
    const char* files[] = {"a.c", "", "dir/with/a/long/path/name_of_a_file.cpp", nullptr};
    const char* file = files[in.pick(4)];
    int line = static_cast<int>(in.u16()) - 100;
    Want wf = file == nullptr ? want_any() : w;  // NULL site: refused or recorded
    s = managed ? metrale_alloc_managed_at(st.ctx, bytes, file, line, &p)
                : metrale_alloc_at(st.ctx, bytes, file, line, &p);
    expect(s, wf, managed ? "alloc_managed" : "alloc");
  }
  if (s == METRALE_OK) {
    add_alloc(st, p, bytes, !arena, managed ? METRALE_ALLOC_MANAGED : METRALE_ALLOC_DEVICE);
    if (!arena) {
      st.allocs_since_reset++;
      st.alloc_bytes_since_reset += bytes;
    }
  }
}

// A free's answer when it would be OK: CAPTURE is allowed too while a
// stream the block was marked on captures (its event would go into the
// graph; the header's rule for metrale_record_stream).
Want free_want(State& st, const Alloc& a, Want w) {
  if (w.kind != Want::Ok) return w;
  for (metrale_stream_t* s : a.marked)
    if (metrale_stream_is_capturing(st.ctx, s) == 1) return want_ok_or(METRALE_ERROR_CAPTURE);
  return w;
}

void do_free(State& st, Bytes& in, bool arena) {
  long i = pick_alloc(st, in, !arena);
  if (i < 0) return;
  metrale_devptr_t p = st.m.allocs[static_cast<size_t>(i)].ptr;
  Want w = free_want(st, st.m.allocs[static_cast<size_t>(i)],
                     st.m.lost ? want_ok_or(METRALE_ERROR_CONTEXT_LOST) : want_ok());
  metrale_status_t s = arena ? metrale_free_arena(st.ctx, p) : metrale_free(st.ctx, p);
  expect(s, w, arena ? "free_arena" : "free");
  if (s == METRALE_OK) remove_alloc(st, static_cast<size_t>(i));
}

// Frees that must be refused and leave everything as it was.
void do_bad_free(State& st, Bytes& in) {
  metrale_devptr_t p;
  Want w = want_status(METRALE_ERROR_NOT_FOUND);
  switch (in.pick(5)) {
    case 0:
      if (st.m.freed.empty()) return;
      p = st.m.freed[in.pick(st.m.freed.size())];
      // Freed, then covered by a larger block: an interior pointer now.
      if (st.m.find_block(p, 1)) return;
      break;
    case 1: {
      long i = pick_alloc(st, in, true);
      if (i < 0) return;
      const Alloc& a = st.m.allocs[static_cast<size_t>(i)];
      p = a.ptr + 1 + in.pick(a.bytes + a.pad + 64);
      // Past the pad may be the next block: another live allocation's start.
      for (const Alloc& o : st.m.allocs)
        if (o.ptr == p) return;
      // Interior: INVALID_ARGUMENT naming the allocation; past its end: NOT_FOUND.
      w = p < a.ptr + a.bytes ? want_status(METRALE_ERROR_INVALID_ARGUMENT) : want_fail();
      break;
    }
    case 2: {
      long i = pick_alloc(st, in, false);  // an arena pointer is not on the ledger
      if (i < 0) return;
      p = st.m.allocs[static_cast<size_t>(i)].ptr;
      break;
    }
    case 3:
      p = in.u64() | 1;
      if (st.m.find_block(p, 1)) return;
      break;
    default: {
      long i = pick_alloc(st, in, true);  // a ledger pointer is no arena
      if (i < 0) return;
      p = st.m.allocs[static_cast<size_t>(i)].ptr;
      expect(metrale_free_arena(st.ctx, p), want_fail(), "free_arena of a ledger pointer");
      return;
    }
  }
  if (st.m.lost) w = want_fail();
  expect(metrale_free(st.ctx, p), w, "bad free");
}

void do_pinned(State& st, Bytes& in, unsigned which) {
  if (which == 0) {
    if (st.m.pinned.size() >= 8) return;
    size_t bytes = pick_alloc_size(in);
    void* p = nullptr;
    Want w = bytes == 0 ? want_status(METRALE_ERROR_INVALID_ARGUMENT)
             : bytes > kMaxAlloc || st.m.lost ? want_fail() : want_ok();
    if (expect(metrale_host_alloc_pinned(st.ctx, bytes, &p), w, "host_alloc_pinned") == METRALE_OK)
      st.m.pinned.push_back({p, bytes});
    return;
  }
  if (which == 1) {
    if (st.m.pinned.empty() || in.pick(4) == 0) {
      static uint8_t not_pinned[16];
      expect(metrale_host_free_pinned(st.ctx, not_pinned + in.pick(16)),
             want_status(METRALE_ERROR_NOT_FOUND), "host_free_pinned unknown");
      return;
    }
    size_t i = in.pick(st.m.pinned.size());
    expect(metrale_host_free_pinned(st.ctx, st.m.pinned[i].ptr), want_ok(), "host_free_pinned");
    st.m.pinned.erase(st.m.pinned.begin() + static_cast<long>(i));
    return;
  }
  if (which == 2) {
    if (st.m.registered) {
      uint8_t* r = st.m.registered;
      expect(metrale_host_unregister(st.ctx, r), want_ok(), "host_unregister");
      st.m.registered = nullptr;
      expect(metrale_host_unregister(st.ctx, r), want_status(METRALE_ERROR_NOT_FOUND),
             "host_unregister twice");
      return;
    }
    size_t off = in.pick(64), bytes = in.pick(kMaxAlloc - 64);
    Want w = bytes == 0 ? want_status(METRALE_ERROR_INVALID_ARGUMENT)
             : st.m.lost ? want_any() : want_ok();
    if (expect(metrale_host_register(st.ctx, g_registrable + off, bytes), w, "host_register") ==
        METRALE_OK) {
      st.m.registered = g_registrable + off;
      st.m.registered_bytes = bytes;
      expect(metrale_host_register(st.ctx, g_registrable + off + bytes / 2, 1),
             want_status(METRALE_ERROR_INVALID_ARGUMENT), "host_register overlap");
    }
    return;
  }
  // Queries on pinned memory.
  if (st.m.pinned.empty()) return;
  const Pinned& h = st.m.pinned[in.pick(st.m.pinned.size())];
  size_t off = in.pick(h.bytes), n = in.pick(h.bytes + 8);
  int yes = -1;
  Want w = n == 0 ? want_status(METRALE_ERROR_INVALID_ARGUMENT) : want_ok();
  if (expect(metrale_host_is_pinned(st.ctx, static_cast<char*>(h.ptr) + off, n, &yes), w,
             "host_is_pinned") == METRALE_OK) {
    if (off + n <= h.bytes && yes != 1) violated("is_pinned inside a block", "pinned", METRALE_OK);
    if (yes != 0 && yes != 1) violated("is_pinned not 0/1", "pinned", METRALE_OK);
  }
  metrale_devptr_t d = 0;
  if (expect(metrale_host_device_pointer(st.ctx, static_cast<char*>(h.ptr) + off, &d),
             st.m.lost ? want_any() : want_ok(), "host_device_pointer") == METRALE_OK &&
      d != reinterpret_cast<uint64_t>(h.ptr) + off)
    violated("host backend device pointer is not the host address", "pinned", METRALE_OK);
}

// The caching pool's calls (rule 9): stream-ordered alloc and free on any
// stream (dead, default, capturing), record_stream, trim and stats.
void do_pool(State& st, Bytes& in, unsigned which) {
  StreamPick sp = pick_stream(st, in);
  switch (which) {
    case 0: {  // alloc_async
      if (st.m.allocs.size() >= 48) return;
      size_t bytes = pick_alloc_size(in);
      Want w = bytes == 0 ? want_status(METRALE_ERROR_INVALID_ARGUMENT)
               : bytes > kMaxAlloc || st.m.lost ? want_fail() : want_ok();
      if (sp.dead) w = want_fail();
      metrale_devptr_t p = 0;
      if (expect(metrale_alloc_async(st.ctx, bytes, sp.s, &p), w, "alloc_async") == METRALE_OK) {
        add_alloc(st, p, bytes, true, METRALE_ALLOC_DEVICE);
        st.allocs_since_reset++;
        st.alloc_bytes_since_reset += bytes;
      }
      return;
    }
    case 1: {  // free_async: a capturing stream defers the reuse, the free is OK
      long i = pick_alloc(st, in, true);
      if (i < 0) return;
      Want w = sp.dead ? want_fail() : st.m.lost ? want_ok_or(METRALE_ERROR_CONTEXT_LOST) : want_ok();
      w = free_want(st, st.m.allocs[static_cast<size_t>(i)], w);
      if (expect(metrale_free_async(st.ctx, st.m.allocs[static_cast<size_t>(i)].ptr, sp.s), w,
                 "free_async") == METRALE_OK)
        remove_alloc(st, static_cast<size_t>(i));
      return;
    }
    case 2: {  // record_stream
      long i = pick_alloc(st, in, true);
      if (i < 0) return;
      Want w = sp.dead ? want_fail() : st.m.lost ? want_any() : want_ok();
      Alloc& a = st.m.allocs[static_cast<size_t>(i)];
      if (expect(metrale_record_stream(st.ctx, a.ptr, sp.s), w, "record_stream") == METRALE_OK &&
          st.m.pooled)
        a.marked.push_back(sp.s != nullptr ? sp.s : metrale_default_stream(st.ctx));
      return;
    }
    case 3: {  // trim
      size_t released = 0;
      expect(metrale_pool_trim(st.ctx, in.pick(4) == 0 ? SIZE_MAX : in.pick(4u << 20), &released),
             unless_lost_ok(st), "pool_trim");
      return;
    }
    default: {  // stats: consistent with the ledger
      metrale_pool_stats_t ps;
      std::memset(&ps, 0, sizeof ps);
      ps.struct_size = sizeof ps;
      expect(metrale_pool_stats(st.ctx, &ps), want_ok(), "pool_stats");
      if (ps.enabled != (st.m.pooled ? 1 : 0)) violated("pool_stats enabled", "pool_stats", METRALE_OK);
      if (ps.cached_bytes != ps.reserved_bytes - ps.in_use_bytes || ps.in_use_bytes > ps.reserved_bytes)
        violated("pool_stats cached != reserved - in_use", "pool_stats", METRALE_OK);
      size_t device_allocs = 0;
      for (const Alloc& a : st.m.allocs)
        device_allocs += a.ledger && a.kind == METRALE_ALLOC_DEVICE;
      if (st.m.pooled && ps.blocks_in_use < device_allocs)
        violated("pool_stats: fewer blocks in use than live allocations", "pool_stats", METRALE_OK);
      return;
    }
  }
}

}  // namespace

void op_memory(State& st, Bytes& in, unsigned which) {
  switch (which) {
    case 0: do_alloc(st, in, false, false); break;
    case 1: do_alloc(st, in, true, false); break;
    case 2: do_free(st, in, false); break;
    case 3: do_bad_free(st, in); break;
    case 4: do_alloc(st, in, false, true); break;
    case 5: do_free(st, in, true); break;
    case 6: do_pinned(st, in, 0); break;
    case 7: do_pinned(st, in, 1); break;
    case 8: do_pinned(st, in, 2); break;
    case 9: do_pinned(st, in, 3); break;
    default: do_pool(st, in, which - 10); break;
  }
}

}  // namespace fuzz
