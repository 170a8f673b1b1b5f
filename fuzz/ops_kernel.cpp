// Host kernels: a bounds-aware writer the model follows, kernels registered
// with random parameter sizes and launched packed with random buffer sizes,
// a kernel without sizes, module unloads, lookups and a simulated fault.
#include <string>

#include "fuzz_state.hpp"

namespace fuzz {

namespace {

volatile uint8_t g_sink;

// Touches every byte a kernel was handed, so ASan sees a short buffer.
void read_all(const void* p, size_t n) {
  const auto* b = static_cast<const uint8_t*>(p);
  uint8_t x = 0;
  for (size_t i = 0; i < n; ++i) x ^= b[i];
  g_sink = x;
}

metrale_status_t raw_kernel(const metrale_host_kernel_call_t* call, void*) {
  if (call->args_bytes != 0 && call->args == nullptr) return METRALE_ERROR_INVALID_ARGUMENT;
  read_all(call->args, call->args_bytes);
  return METRALE_OK;
}

metrale_status_t rand_kernel(const metrale_host_kernel_call_t* call, void* user) {
  const auto* k = static_cast<const RandKernel*>(user);
  if (call->params == nullptr) return METRALE_ERROR_INVALID_ARGUMENT;
  for (size_t i = 0; i < k->sizes.size(); ++i) read_all(call->params[i], k->sizes[i]);
  read_all(call->args, call->args_bytes);
  return call->args_bytes == k->total ? METRALE_OK : METRALE_ERROR_INVALID_ARGUMENT;
}

metrale_status_t fault_kernel(const metrale_host_kernel_call_t*, void*) {
  return METRALE_ERROR_CONTEXT_LOST;
}

// The layout rule of the header: each parameter aligned to the largest power
// of two dividing its size, at most 8; no trailing padding.
size_t packed_size(const std::vector<size_t>& sizes) {
  size_t off = 0;
  for (size_t s : sizes) {
    size_t a = s & (~s + 1);
    if (a > 8) a = 8;
    off = (off + a - 1) & ~(a - 1);
    off += s;
  }
  return off;
}

struct Dims {
  metrale_dim3_t grid{1, 1, 1}, block{1, 1, 1};
  uint32_t shared = 0;
  bool zero = false, odd = false;
};

Dims pick_dims(Bytes& in) {
  Dims d;
  if (in.pick(6) != 0) {
    d.grid.x = 1 + static_cast<uint32_t>(in.pick(64));
    d.block.x = 1 + static_cast<uint32_t>(in.pick(256));
    d.shared = static_cast<uint32_t>(in.pick(1024));
    return d;
  }
  d.grid = {in.u32() % 70000, in.u8() % 3u, 1};
  d.block = {in.u16() % 2048u, 1, in.u8() % 2u};
  d.shared = in.u32();
  d.zero = !d.grid.x || !d.grid.y || !d.grid.z || !d.block.x || !d.block.y || !d.block.z;
  d.odd = true;
  return d;
}

// The status a launch must get before the kernel's own answer counts.
// When several arguments are wrong, any failure will do: the order of the
// library's checks is not part of the contract.
Want launch_want(State& st, const Dims& d, const StreamPick& sp, bool kernel_alive) {
  if (!kernel_alive || sp.dead) return want_fail();
  if (d.zero) return st.m.lost ? want_fail() : want_status(METRALE_ERROR_INVALID_ARGUMENT);
  if (st.m.lost) return want_fail();
  if (sp.capturing || d.odd) return want_any();
  return want_ok();
}

// Would the touch kernel's range be memory it may write?
bool touch_target_ok(Model& m, uint64_t p, uint64_t n) {
  for (const Alloc& a : m.allocs) {
    size_t limit = a.bytes + (a.ledger ? a.pad : 0);
    if (p >= a.ptr && p - a.ptr <= limit && n <= limit - (p - a.ptr)) return true;
  }
  return false;
}

void launch_touch(State& st, Bytes& in, bool packed) {
  uint64_t p = pick_device_ptr(st, in);
  uint64_t n = in.pick(4) == 0 ? pick_length(in, 64) : in.pick(512);
  uint32_t value = in.pick(3) == 0 ? METRALE_REDZONE_PATTERN : in.u8();
  Dims d = pick_dims(in);
  StreamPick sp = pick_stream(st, in);
  Want w = launch_want(st, d, sp, st.touch_alive);
  if (w.kind == Want::Ok && !touch_target_ok(st.m, p, n))
    w = want_status(METRALE_ERROR_INVALID_ARGUMENT);
  metrale_status_t s;
  if (packed) {
    uint8_t args[24] = {};
    std::memcpy(args, &p, 8);
    std::memcpy(args + 8, &n, 8);
    std::memcpy(args + 16, &value, 4);
    size_t bytes = in.pick(5) == 0 ? in.pick(25) : 20;
    if (bytes != 20 && w.kind != Want::Fail)
      w = st.m.lost || w.kind == Want::FailWith ? want_fail()
                                                : want_status(METRALE_ERROR_INVALID_ARGUMENT);
    std::vector<uint8_t> exact(args, args + bytes);  // exactly bytes long, for ASan
    s = metrale_launch_packed(st.ctx, st.touch, d.grid, d.block, d.shared, sp.s,
                              bytes ? exact.data() : nullptr, bytes);
  } else if (in.pick(8) == 0) {
    if (w.kind != Want::Fail && !d.zero)
      w = st.m.lost ? want_fail() : want_status(METRALE_ERROR_INVALID_ARGUMENT);
    s = metrale_launch(st.ctx, st.touch, d.grid, d.block, d.shared, sp.s, nullptr);
  } else {
    void* params[3] = {&p, &n, &value};
    s = metrale_launch(st.ctx, st.touch, d.grid, d.block, d.shared, sp.s, params);
  }
  expect(s, w, packed ? "launch_packed touch" : "launch touch");
  if (s == METRALE_ERROR_CONTEXT_LOST) violated("touch kernel lost the context", "launch", s);
}

void register_rand(State& st, Bytes& in) {
  if (st.rand_kernels.size() >= 8) return;
  static const size_t kSizes[] = {1, 2, 3, 4, 5, 8, 12, 16, 24, 64, 4096, 0, 5000};
  auto k = std::make_unique<RandKernel>();
  size_t n = in.pick(9);
  bool bad = false;
  for (size_t i = 0; i < n; ++i) {
    size_t s = kSizes[in.pick(sizeof kSizes / sizeof kSizes[0])];
    bad |= s == 0 || s > 4096;
    k->sizes.push_back(s);
  }
  k->total = packed_size(k->sizes);
  k->module = "r" + std::to_string(st.modules_made++);
  bool null_sizes = n > 0 && in.pick(8) == 0;
  Want w = bad || null_sizes ? want_status(METRALE_ERROR_INVALID_ARGUMENT) : unless_lost_ok(st);
  metrale_status_t s = metrale_module_register_host_params(
      st.ctx, k->module.c_str(), "f", rand_kernel, k.get(),
      null_sizes ? nullptr : k->sizes.data(), n);
  if (expect(s, w, "register_host_params") != METRALE_OK) return;
  expect(metrale_module_register_host_params(st.ctx, k->module.c_str(), "f", rand_kernel, k.get(),
                                             k->sizes.data(), n),
         want_status(METRALE_ERROR_INVALID_ARGUMENT), "register_host_params name taken");
  expect(metrale_kernel_get(st.ctx, k->module.c_str(), "f", &k->k), want_ok(), "kernel_get");
  st.rand_kernels.push_back(std::move(k));
}

void launch_rand(State& st, Bytes& in) {
  if (st.rand_kernels.empty()) return;
  RandKernel& k = *st.rand_kernels[in.pick(st.rand_kernels.size())];
  Dims d = pick_dims(in);
  StreamPick sp = pick_stream(st, in);
  Want w = launch_want(st, d, sp, k.alive);
  metrale_status_t s;
  if (in.pick(2) == 0) {
    size_t bytes = in.pick(4) == 0 ? in.pick(k.total + 16) : k.total;
    if (bytes != k.total) w = want_fail();
    std::vector<uint8_t> args(bytes);
    for (size_t i = 0; i < bytes; ++i) args[i] = static_cast<uint8_t>(i);
    s = metrale_launch_packed(st.ctx, k.k, d.grid, d.block, d.shared, sp.s,
                              bytes ? args.data() : nullptr, bytes);
  } else {
    std::vector<std::vector<uint8_t>> values;
    std::vector<void*> params;
    for (size_t size : k.sizes) {
      values.emplace_back(size, static_cast<uint8_t>(size));
      params.push_back(values.back().data());
    }
    s = metrale_launch(st.ctx, k.k, d.grid, d.block, d.shared, sp.s,
                       params.empty() ? nullptr : params.data());
  }
  expect(s, w, "launch rand kernel");
}

void launch_raw(State& st, Bytes& in) {
  Dims d = pick_dims(in);
  StreamPick sp = pick_stream(st, in);
  Want w = launch_want(st, d, sp, st.touch_alive);
  metrale_status_t s;
  if (in.pick(2) == 0) {
    size_t bytes = in.pick(4) == 0 ? in.u16() : in.pick(64);
    if (bytes > 4096 && w.kind == Want::Ok) w = want_any();
    std::vector<uint8_t> args(bytes, 0x5a);
    s = metrale_launch_packed(st.ctx, st.raw, d.grid, d.block, d.shared, sp.s,
                              bytes ? args.data() : nullptr, bytes);
  } else {
    s = metrale_launch(st.ctx, st.raw, d.grid, d.block, d.shared, sp.s, nullptr);
  }
  expect(s, w, "launch raw kernel");
}

void unload(State& st, Bytes& in) {
  if (in.pick(4) == 0) {
    expect(metrale_module_unload(st.ctx, "no_such_module"), want_status(METRALE_ERROR_NOT_FOUND),
           "module_unload unknown");
    return;
  }
  bool fz = st.rand_kernels.empty() || in.pick(6) == 0;
  RandKernel* k = fz ? nullptr : st.rand_kernels[in.pick(st.rand_kernels.size())].get();
  const char* name = fz ? "fz" : k->module.c_str();
  bool alive = fz ? st.touch_alive : k->alive;
  metrale_status_t s = expect(metrale_module_unload(st.ctx, name),
                              alive ? want_any() : want_status(METRALE_ERROR_NOT_FOUND),
                              "module_unload");
  if (s != METRALE_OK) return;
  if (fz) st.touch_alive = false;
  else k->alive = false;
  if (metrale_has_module(st.ctx, name) != 0) violated("has_module after unload", name, s);
  metrale_kernel_t* out = nullptr;
  expect(metrale_kernel_get(st.ctx, name, fz ? "touch" : "f", &out),
         want_status(METRALE_ERROR_NOT_FOUND), "kernel_get after unload");
}

void lookup(State& st, Bytes& in) {
  static const char* modules[] = {"fz", "r0", "r1", "", "nope", "fz\n"};
  static const char* funcs[] = {"touch", "raw", "f", "", "x", "fault"};
  const char* mod = modules[in.pick(6)];
  const char* fn = funcs[in.pick(6)];
  metrale_kernel_t* k = nullptr;
  metrale_status_t s = expect(metrale_kernel_get(st.ctx, mod, fn, &k), want_any(), "kernel_get");
  if (s == METRALE_OK && k == nullptr) violated("kernel_get OK with NULL", mod, s);
  if (s != METRALE_OK && s != METRALE_ERROR_NOT_FOUND && s != METRALE_ERROR_INVALID_ARGUMENT)
    violated("kernel_get status", mod, s);
  int has = metrale_has_module(st.ctx, mod);
  if (has != 0 && has != 1) violated("has_module not 0/1", mod, METRALE_OK);
  if (s == METRALE_OK && has != 1) violated("kernel found in a module that is not there", mod, s);
}

void simulate_fault(State& st, Bytes& in) {
  // Two exact bytes: a lost context makes the rest of the input dull.
  if (in.u8() != 0xFA || in.u8() != 0xCE || st.m.lost || !st.touch_alive) return;
  StreamPick sp = pick_stream(st, in);
  if (sp.dead || sp.capturing) return;
  expect(metrale_launch(st.ctx, st.fault, {1, 1, 1}, {1, 1, 1}, 0, sp.s, nullptr),
         want_status(METRALE_ERROR_CONTEXT_LOST), "fault kernel");
  st.m.lost = true;
  expect(metrale_context_fault(st.ctx), want_status(METRALE_ERROR_CONTEXT_LOST), "context_fault");
}

}  // namespace

metrale_status_t touch_kernel(const metrale_host_kernel_call_t* call, void* user) {
  auto* st = static_cast<State*>(user);
  uint64_t p, n;
  uint32_t value;
  std::memcpy(&p, call->params[0], 8);
  std::memcpy(&n, call->params[1], 8);
  std::memcpy(&value, call->params[2], 4);
  if (!touch_target_ok(st->m, p, n)) return METRALE_ERROR_INVALID_ARGUMENT;
  if (n == 0) return METRALE_OK;
  std::memset(reinterpret_cast<void*>(p), static_cast<int>(value & 0xff), n);
  for (Alloc& a : st->m.allocs) {
    // Strictly inside: p at the end of one block is the start of the next.
    if (p < a.ptr || p - a.ptr >= a.bytes + a.pad) continue;
    uint64_t end = p + n, buf_end = a.ptr + a.bytes;
    if (p < buf_end) a.fill(p, static_cast<uint8_t>(value), (end < buf_end ? end : buf_end) - p);
    if (end > buf_end && a.pad) {
      if (static_cast<uint8_t>(value) != METRALE_REDZONE_PATTERN) a.pad_state = Pad::Dirty;
      else if (a.pad_state == Pad::Dirty) a.pad_state = Pad::Unknown;
    }
    break;
  }
  return METRALE_OK;
}

void setup_kernels(State& st) {
  static const size_t touch_sizes[] = {8, 8, 4};
  static const size_t none[1] = {0};
  expect(metrale_module_register_host_params(st.ctx, "fz", "touch", touch_kernel, &st, touch_sizes,
                                             3),
         want_ok(), "register touch");
  expect(metrale_module_register_host(st.ctx, "fz", "raw", raw_kernel, nullptr), want_ok(),
         "register raw");
  expect(metrale_module_register_host_params(st.ctx, "fz", "fault", fault_kernel, nullptr, none, 0),
         want_ok(), "register fault");
  expect(metrale_kernel_get(st.ctx, "fz", "touch", &st.touch), want_ok(), "get touch");
  expect(metrale_kernel_get(st.ctx, "fz", "raw", &st.raw), want_ok(), "get raw");
  expect(metrale_kernel_get(st.ctx, "fz", "fault", &st.fault), want_ok(), "get fault");
}

void op_kernel(State& st, Bytes& in, unsigned which) {
  switch (which) {
    case 0: launch_touch(st, in, false); break;
    case 1: launch_touch(st, in, true); break;
    case 2: register_rand(st, in); break;
    case 3: launch_rand(st, in); break;
    case 4: launch_raw(st, in); break;
    case 5: unload(st, in); break;
    case 6: lookup(st, in); break;
    default: simulate_fault(st, in); break;
  }
}

}  // namespace fuzz
