// libFuzzer entry: one host-backend context per input, its options from the
// first bytes, then up to 512 ABI calls chosen by the rest, each checked
// against the model (fuzz_model.hpp), the ledger compared after every call,
// and a teardown that either frees everything (ledger must reach zero) or
// destroys the context with everything still live (LeakSanitizer checks that
// the library let go of it all). The previous input's context and handles,
// all destroyed, must be refused by the next input's contexts (rule 2).
#include <cstdio>
#include <cstdlib>
#include <cstring>

#include "fuzz_state.hpp"

namespace {

void quiet(metrale_log_level_t, const char*, void*) {}

// The previous input's context and some of its handles; dead by now.
struct Dead {
  metrale_context_t* ctx = nullptr;
  metrale_stream_t* stream = nullptr;
  metrale_event_t* event = nullptr;
  metrale_graph_t* graph = nullptr;
  metrale_kernel_t* kernel = nullptr;
} g_dead;

void remember(const fuzz::State& st) {
  g_dead.ctx = st.ctx;
  g_dead.stream = !st.streams.empty() ? st.streams[0] : metrale_default_stream(st.ctx);
  g_dead.event = !st.events.empty() ? st.events[0].e : nullptr;
  g_dead.graph = !st.graphs.empty() ? st.graphs[0] : nullptr;
  g_dead.kernel = st.touch;
}

void check_dead(fuzz::State& st) {
  using namespace fuzz;
  if (g_dead.ctx == nullptr) return;
  size_t n = 0;
  expect(metrale_live_count(g_dead.ctx, &n), want_status(METRALE_ERROR_INVALID_ARGUMENT),
         "dead context");
  expect(metrale_context_destroy(g_dead.ctx), want_status(METRALE_ERROR_INVALID_ARGUMENT),
         "dead context destroy");
  expect(metrale_stream_synchronize(st.ctx, g_dead.stream),
         want_status(METRALE_ERROR_INVALID_ARGUMENT), "dead context's stream");
  if (g_dead.event != nullptr)
    expect(metrale_event_destroy(st.ctx, g_dead.event), want_status(METRALE_ERROR_INVALID_ARGUMENT),
           "dead context's event");
  if (g_dead.graph != nullptr)
    expect(metrale_graph_destroy(st.other, g_dead.graph),
           want_status(METRALE_ERROR_INVALID_ARGUMENT), "dead context's graph");
  if (g_dead.kernel != nullptr)
    expect(metrale_launch(st.ctx, g_dead.kernel, {1, 1, 1}, {1, 1, 1}, 0, nullptr, nullptr),
           want_status(METRALE_ERROR_INVALID_ARGUMENT), "dead context's kernel");
}

void teardown(fuzz::State& st) {
  using namespace fuzz;
  for (metrale_stream_t* s : st.streams)
    expect(metrale_graph_abort_capture(st.ctx, s), unless_lost_ok(st), "abort_capture");
  expect(metrale_graph_abort_capture(st.ctx, nullptr), unless_lost_ok(st), "abort_capture");
  for (metrale_graph_t* g : st.graphs) expect(metrale_graph_destroy(st.ctx, g), want_ok(), "graph_destroy");
  for (const Event& e : st.events) expect(metrale_event_destroy(st.ctx, e.e), want_ok(), "event_destroy");
  for (metrale_stream_t* s : st.streams)
    expect(metrale_stream_destroy(st.ctx, s), want_ok(), "stream_destroy");
  for (const Alloc& a : st.m.allocs)
    expect(a.ledger ? metrale_free(st.ctx, a.ptr) : metrale_free_arena(st.ctx, a.ptr),
           unless_lost_ok(st), "free at teardown");
  for (const Pinned& p : st.m.pinned)
    expect(metrale_host_free_pinned(st.ctx, p.ptr), want_ok(), "host_free_pinned");
  if (st.m.registered)
    expect(metrale_host_unregister(st.ctx, st.m.registered), want_ok(), "host_unregister");
  size_t count = 1, bytes = 1;
  expect(metrale_live_count(st.ctx, &count), want_ok(), "live_count");
  expect(metrale_live_bytes(st.ctx, &bytes), want_ok(), "live_bytes");
  if (!st.m.lost && (count != 0 || bytes != 0))
    violated("ledger not empty after freeing everything", "teardown", METRALE_OK);
  // Nothing freed may stay lost to the pool: with every capture closed and
  // the freed pads checked (a scan runs that check first), no block is
  // handed out. A deferred free that failed at its release once left one.
  if (st.m.pooled && !st.m.lost) {
    size_t found = 0;
    metrale_redzone_scan(st.ctx, nullptr, 0, &found);  // any status: only the check matters
    metrale_pool_stats_t ps;
    std::memset(&ps, 0, sizeof ps);
    ps.struct_size = sizeof ps;
    expect(metrale_pool_stats(st.ctx, &ps), want_ok(), "pool_stats at teardown");
    if (ps.blocks_in_use != 0) {
      std::fprintf(stderr, "blocks_in_use %llu, pads_pending %llu\n",
                   static_cast<unsigned long long>(ps.blocks_in_use),
                   static_cast<unsigned long long>(ps.pads_pending));
      violated("pool blocks still in use after everything was freed", "teardown", METRALE_OK);
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  // The options struct is what the input chooses: no environment overrides.
  for (const char* v : {"METRALE_BACKEND", "METRALE_DEVICE", "METRALE_REDZONE",
                        "METRALE_REDZONE_MIN_IDX", "METRALE_CHECKED", "METRALE_DEBUG_SYNC",
                        "METRALE_LAUNCH_TRACE", "METRALE_KERNEL_TIMING", "METRALE_LOG",
                        "METRALE_REDZONE_VERIFY_BATCH", "METRALE_REDZONE_VERIFY_BYTES",
                        "METRALE_REDZONE_VERIFY_ORDERED"})
    unsetenv(v);
  metrale_log_set_callback(quiet, nullptr);
  metrale_log_set_level(METRALE_LOG_OFF);
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace fuzz;
  Bytes in(data, size);
  const uint8_t flags = in.u8();
  metrale_context_options_t opts;
  expect(metrale_context_options_init(&opts), want_ok(), "options_init");
  opts.backend = METRALE_BACKEND_HOST;
  static const size_t pads[] = {0, 8, 32, 256};
  opts.checked_pointers = flags & 1;
  opts.redzone_bytes = pads[(flags >> 1) & 3];
  // One byte, as in.pick(4) read it: its bit 2 also picks the teardown, so
  // pooled contexts are freed to the end too (the pool bit alone did that).
  const uint8_t second = in.u8();
  opts.redzone_min_index = second % 4;
  const bool free_all = ((flags >> 7) & 1) != 0 || ((second >> 2) & 1) != 0;
  opts.debug_sync = (flags >> 3) & 1;
  opts.launch_trace = (flags >> 4) & 1;
  opts.kernel_timing = (flags >> 5) & 1;
  if ((flags >> 6) & 1) opts.trace_capacity = 1 + in.pick(8);
  opts.pool = ((flags >> 7) & 1) ? 0 : 1;
  opts.pinned_pool = opts.pool;  // the model's `pooled`: freed memory may stay mapped

  // The red-zone check of freed blocks: batches of 256 (the default, which
  // short inputs reach only at scans and teardown), 1 (synchronous, at each
  // free), 2 or 3 (stream-ordered, mid-input); bit 6 turns the ordered form
  // off. Read from the second byte's spare bits: older inputs keep their
  // meaning otherwise.
  static const char* const batches[] = {nullptr, "1", "2", "3"};
  const char* batch = batches[(second >> 4) & 3];
  if (batch != nullptr) setenv("METRALE_REDZONE_VERIFY_BATCH", batch, 1);
  if (((second >> 6) & 1) != 0) setenv("METRALE_REDZONE_VERIFY_ORDERED", "0", 1);

  State st;
  st.m.checked = opts.checked_pointers != 0;
  st.m.pooled = opts.pool != 0;
  expect(metrale_context_create(&opts, &st.ctx), want_ok(), "context_create");
  expect(metrale_context_create(&opts, &st.other), want_ok(), "context_create other");
  unsetenv("METRALE_REDZONE_VERIFY_BATCH");
  unsetenv("METRALE_REDZONE_VERIFY_ORDERED");
  setup_kernels(st);
  check_dead(st);

  // FUZZ_TRACE=1 prints each call's group and number: reading a saved crash.
  static const bool trace = std::getenv("FUZZ_TRACE") != nullptr;
  if (trace) std::fprintf(stderr, "input: flags 0x%02x pad %zu pool %d\n", flags, opts.redzone_bytes, opts.pool);
  for (int i = 0; i < 512 && !in.empty(); ++i) {
    unsigned op = static_cast<unsigned>(in.pick(kMemoryOps + kCopyOps + kWorkOps + kKernelOps + kQueryOps));
    if (trace) std::fprintf(stderr, "op %d: %u\n", i, op);
    if (op < kMemoryOps) op_memory(st, in, op);
    else if ((op -= kMemoryOps) < kCopyOps) op_copy(st, in, op);
    else if ((op -= kCopyOps) < kWorkOps) op_work(st, in, op);
    else if ((op -= kWorkOps) < kKernelOps) op_kernel(st, in, op);
    else op_query(st, in, op - kKernelOps);
    check_ledger(st, "an operation");
  }

  if (free_all) teardown(st);
  remember(st);
  expect(metrale_context_destroy(st.ctx), want_ok(), "context_destroy");
  expect(metrale_context_destroy(st.other), want_ok(), "context_destroy other");
  return 0;
}
