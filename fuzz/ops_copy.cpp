// Copies and memsets with in- and out-of-range pointers and sizes, checked
// against the model's shadow of every buffer.
#include "fuzz_state.hpp"

namespace fuzz {

namespace {

uint8_t g_src[kHostBuf];
uint8_t g_dst[kHostBuf];

// A host offset that keeps [off, off+n) inside a kHostBuf buffer when it can.
size_t host_offset(Bytes& in, uint64_t n) { return n >= kHostBuf ? 0 : in.pick(kHostBuf - n + 1); }

// Bytes from p to the end of the buffer it lies in (64 when none).
uint64_t room_at(Model& m, uint64_t p) {
  for (const Alloc& a : m.allocs)
    if (p >= a.ptr && p < a.ptr + a.bytes) return a.ptr + a.bytes - p;
  return 64;
}

// Forgets what the model knew about every byte [p, p+n) may have reached.
void forget(Model& m, uint64_t p, uint64_t n) {
  for (Alloc& a : m.allocs) {
    uint64_t lo = p > a.ptr ? p : a.ptr;
    uint64_t end = p + n < p ? UINT64_MAX : p + n;
    uint64_t hi = end < a.ptr + a.bytes ? end : a.ptr + a.bytes;
    if (lo < hi) a.forget(lo, hi - lo);
    if (end > a.ptr + a.bytes && p < a.ptr + a.bytes + a.pad) a.touched_beyond(p, end - p);
  }
}

// What an accepted write of n bytes at p did to the model.
void wrote(Model& m, uint64_t p, uint64_t n, const uint8_t* src, int fill, bool capturing) {
  Alloc* a = capturing ? nullptr : m.find_inside(p, n);
  if (a == nullptr) return forget(m, p, n);
  if (src) a->write(p, src, n);
  else a->fill(p, static_cast<uint8_t>(fill), n);
}

// Compares what a read returned with the shadow, then learns it.
void read_back(Model& m, uint64_t p, const uint8_t* got, uint64_t n, const char* what) {
  Alloc* a = m.find_inside(p, n);
  if (a == nullptr) return;
  size_t off = p - a->ptr;
  for (size_t i = 0; i < n; ++i) {
    if (a->known[off + i] && a->shadow[off + i] != got[i]) {
      std::fprintf(stderr, "byte %zu of %#llx: want %u got %u\n", off + i,
                   (unsigned long long)a->ptr, a->shadow[off + i], got[i]);
      violated("device bytes differ from what was written", what, METRALE_OK);
    }
  }
  a->write(p, got, n);
}

void seed_source(Bytes& in, size_t off, uint64_t n) {
  uint8_t seed = in.u8();
  for (uint64_t i = 0; i < n && off + i < kHostBuf; ++i)
    g_src[off + i] = static_cast<uint8_t>(seed + i * 7);
}

bool default_capturing(State& st) { return metrale_stream_is_capturing(st.ctx, nullptr) == 1; }

}  // namespace

uint64_t pick_device_ptr(State& st, Bytes& in) {
  Model& m = st.m;
  switch (in.pick(10)) {
    case 0:
      if (!m.freed.empty()) return m.freed[in.pick(m.freed.size())] + in.pick(64);
      return in.u64();
    case 1: return in.u64();
    case 2: return 0;
    case 3:
      if (!m.pinned.empty()) {
        const Pinned& h = m.pinned[in.pick(m.pinned.size())];
        return reinterpret_cast<uint64_t>(h.ptr) + in.pick(h.bytes + 1);
      }
      return in.u64();
    case 4:
      if (!m.allocs.empty()) {
        const Alloc& a = m.allocs[in.pick(m.allocs.size())];
        return a.ptr + a.bytes + in.pick(a.pad + 300) - 16;  // around the end
      }
      return in.u64();
    case 5:
      if (!m.allocs.empty()) return m.allocs[in.pick(m.allocs.size())].ptr - 1 - in.pick(64);
      return in.u64();
    default:
      if (!m.allocs.empty()) {
        const Alloc& a = m.allocs[in.pick(m.allocs.size())];
        return a.ptr + (in.pick(3) == 0 ? 0 : in.pick(a.bytes));
      }
      return in.u64();
  }
}

uint64_t pick_length(Bytes& in, uint64_t room) {
  switch (in.pick(10)) {
    case 0: return 0;
    case 1: return room + 1 + in.pick(8);
    case 2: return room > 0 ? room - 1 : 0;
    case 3: return 1 + in.pick(64);
    case 4: return SIZE_MAX - in.pick(256);
    case 5: return (uint64_t)1 << (32 + in.pick(32));
    case 6: return in.pick(kMaxAlloc);
    default: return room == 0 ? 1 : 1 + in.pick(room);
  }
}

void op_copy(State& st, Bytes& in, unsigned which) {
  Model& m = st.m;
  uint64_t p = pick_device_ptr(st, in);
  uint64_t n = pick_length(in, room_at(m, p));
  Want w = want_for_range(m, p, n);
  bool dcap = default_capturing(st);
  StreamPick sync{nullptr, false, dcap};
  switch (which) {
    case 0: {  // h2d, synchronous
      size_t off = host_offset(in, n);
      seed_source(in, off, n);
      if (expect(metrale_copy_h2d(st.ctx, g_src + off, n, p), for_stream(w, sync), "copy_h2d") == 0)
        wrote(m, p, n, g_src + off, 0, dcap);
      break;
    }
    case 1:    // d2h, synchronous
    case 2:    // d2h on a stream, waiting
    case 3: {  // d2h async, then synchronized here
      size_t off = host_offset(in, n);
      StreamPick sp = which == 1 ? sync : pick_stream(st, in);
      metrale_status_t s;
      if (which == 1) s = metrale_copy_d2h(st.ctx, p, g_dst + off, n);
      else if (which == 2) s = metrale_copy_d2h_on_stream(st.ctx, p, g_dst + off, n, sp.s);
      else s = metrale_copy_d2h_async(st.ctx, p, g_dst + off, n, sp.s);
      expect(s, for_stream(w, sp), "copy_d2h");
      if (s != METRALE_OK || sp.capturing) break;
      if (which == 3) expect(metrale_stream_synchronize(st.ctx, sp.s), want_ok(), "sync after d2h");
      read_back(m, p, g_dst + off, n, "copy_d2h");
      break;
    }
    case 4:    // d2d, synchronous
    case 5: {  // d2d async
      uint64_t q = pick_device_ptr(st, in);
      if (in.pick(3) == 0) q = p + in.pick(2 * n + 1) - n;  // overlapping ranges
      Want wq = combine(w, want_for_range(m, q, n));
      StreamPick sp = which == 4 ? sync : pick_stream(st, in);
      metrale_status_t s = which == 4 ? metrale_copy_d2d(st.ctx, p, q, n)
                                      : metrale_copy_d2d_async(st.ctx, p, q, n, sp.s);
      if (expect(s, for_stream(wq, sp), "copy_d2d") != METRALE_OK) break;
      Alloc* a = sp.capturing ? nullptr : m.find_inside(p, n);
      Alloc* b = sp.capturing ? nullptr : m.find_inside(q, n);
      if (a && b) {
        std::vector<uint8_t> bytes(a->shadow.begin() + (p - a->ptr),
                                   a->shadow.begin() + (p - a->ptr + n));
        std::vector<uint8_t> known(a->known.begin() + (p - a->ptr),
                                   a->known.begin() + (p - a->ptr + n));
        b->write(q, bytes.data(), n);
        std::copy(known.begin(), known.end(), b->known.begin() + (q - b->ptr));
      } else {
        forget(m, q, n);
      }
      break;
    }
    case 6:    // h2d async (from pinned memory when there is some)
    case 7: {  // h2d async, retained source
      size_t off = host_offset(in, n);
      const uint8_t* src = g_src + off;
      StreamPick sp = pick_stream(st, in);
      // A captured copy reads its source at replay: only static sources then,
      // as freeing a pinned block a graph still reads is the caller's error.
      if (which == 6 && !sp.capturing && !m.pinned.empty() && in.pick(2) == 0) {
        const Pinned& h = m.pinned[in.pick(m.pinned.size())];
        if (n <= h.bytes) src = static_cast<uint8_t*>(h.ptr);
      }
      if (src == g_src + off) seed_source(in, off, n);
      metrale_status_t s = which == 6 ? metrale_copy_h2d_async(st.ctx, src, n, p, sp.s)
                                      : metrale_copy_h2d_async_retained(st.ctx, src, n, p, sp.s);
      if (expect(s, for_stream(w, sp), "copy_h2d_async") == METRALE_OK)
        wrote(m, p, n, src, 0, sp.capturing);
      break;
    }
    case 8:
    case 9: {  // memset, synchronous or async
      uint8_t v = in.u8();
      StreamPick sp = which == 8 ? sync : pick_stream(st, in);
      metrale_status_t s = which == 8 ? metrale_memset(st.ctx, p, v, n)
                                      : metrale_memset_async(st.ctx, p, v, n, sp.s);
      if (expect(s, for_stream(w, sp), "memset") == METRALE_OK) wrote(m, p, n, nullptr, v, sp.capturing);
      break;
    }
    case 10: {  // pitched 2D copy
      uint64_t q = pick_device_ptr(st, in);
      size_t width = in.pick(3) == 0 ? n : in.pick(64);
      size_t height = in.pick(4) == 0 ? pick_length(in, 8) : in.pick(9);
      size_t sp_pitch = width + (in.pick(4) == 0 ? SIZE_MAX / 2 : in.pick(32)) - (in.pick(6) == 0);
      size_t dp_pitch = width + in.pick(32) - (in.pick(6) == 0);
      StreamPick sp = pick_stream(st, in);
      Want w2;
      if (sp_pitch < width || dp_pitch < width) {
        w2 = want_status(METRALE_ERROR_INVALID_ARGUMENT);
      } else if (width == 0 || height == 0) {
        w2 = m.lost ? want_ok_or(METRALE_ERROR_CONTEXT_LOST) : want_ok();
      } else if ((height - 1) > (UINT64_MAX - width) / (sp_pitch > dp_pitch ? sp_pitch : dp_pitch)) {
        w2 = want_fail();  // a span past the address space
      } else {
        uint64_t src_span = (height - 1) * sp_pitch + width;
        uint64_t dst_span = (height - 1) * dp_pitch + width;
        w2 = combine(want_for_range(m, p, src_span), want_for_range(m, q, dst_span));
      }
      metrale_status_t s =
          metrale_copy_d2d_2d_async(st.ctx, p, sp_pitch, q, dp_pitch, width, height, sp.s);
      if (expect(s, for_stream(w2, sp), "copy_d2d_2d_async") == METRALE_OK && width && height)
        forget(m, q, (height - 1) * dp_pitch + width);
      break;
    }
    default: {  // NULL host pointers
      Want wn = n == 0 ? want_any() : want_fail();
      expect(metrale_copy_h2d(st.ctx, nullptr, n, p), wn, "copy_h2d NULL");
      expect(metrale_copy_d2h(st.ctx, p, nullptr, n), wn, "copy_d2h NULL");
      break;
    }
  }
}

}  // namespace fuzz
