// The backend interface: raw device operations, nothing else. A backend knows
// no ledger, red zone, trace or counter; core builds those on top of this for
// every backend alike. Errors are thrown as metrale::Error with the status the
// ABI documents and a message naming the driver call, its code and its name.
//
// Handles are opaque 64-bit values chosen by the backend (a CUstream, a
// pointer to a host object, ...). Stream 0 is never used: core always passes
// a stream it created. Every method makes the backend's device context current
// on the calling thread by itself, and every method is thread-safe.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "error.hpp"
#include "metrale_gpu.h"

namespace metrale::backend {

using DevPtr = uint64_t;
using StreamHandle = uint64_t;
using EventHandle = uint64_t;
using GraphHandle = uint64_t;
using ModuleHandle = uint64_t;
using FuncHandle = uint64_t;

struct Dim3 {
  uint32_t x, y, z;
};

struct DeviceInfo {
  std::string name;
  int compute_major = 0, compute_minor = 0;
  int sm_count = 0;
  size_t total_memory = 0;
  int ordinal = 0;
};

// One kernel parameter as the kernel declares it.
struct ParamInfo {
  size_t offset;
  size_t size;
};

// A device byte range, for the batched red-zone operations.
struct Range {
  DevPtr ptr;
  size_t bytes;
};

class Backend {
 public:
  virtual ~Backend() = default;

  virtual metrale_backend_t kind() const = 0;
  virtual DeviceInfo device_info() = 0;
  // The device's free and total memory, as the driver reports them.
  virtual void mem_info(size_t* free_bytes, size_t* total_bytes) = 0;
  // Makes the device context current on this thread (methods do it anyway).
  virtual void bind_thread() = 0;

  // --- memory -----------------------------------------------------------
  // Device memory of at least `bytes`; OUT_OF_MEMORY when the device has not
  // got it. *reserved gets what was really set aside (rounding included).
  virtual DevPtr mem_alloc(size_t bytes, size_t* reserved) = 0;
  virtual DevPtr mem_alloc_managed(size_t bytes, size_t* reserved) = 0;
  // Frees what mem_alloc / mem_alloc_managed gave. A driver status meaning
  // the context is already gone is not an error.
  virtual void mem_free(DevPtr ptr) = 0;

  virtual void* host_alloc_pinned(size_t bytes) = 0;
  virtual void host_free_pinned(void* ptr) = 0;
  virtual void host_register(void* ptr, size_t bytes) = 0;
  virtual void host_unregister(void* ptr) = 0;
  // The device address of pinned/registered host memory (interior too),
  // whoever pinned it; NOT_FOUND when it is not mapped for the device.
  virtual DevPtr host_device_pointer(void* ptr) = 0;
  // True when every byte of [ptr, ptr+bytes) is page-locked host memory, so
  // that an async copy from it is a DMA that reads it later: whoever pinned
  // it (this library, another context, the CUDA runtime, PyTorch). Asks the
  // driver, not core's registry. Pageable memory answers false, never an
  // error; throws only when the driver itself fails (a lost context).
  virtual bool host_range_pinned(const void* ptr, size_t bytes) = 0;
  // True when [ptr, ptr+bytes) lies inside one allocation a copy may target
  // (device, managed or mapped host memory), so that a copy core splits into
  // pieces (pinned staging) cannot fail halfway on a bad range. False when
  // it does not, or the backend cannot tell: core then copies in one piece
  // and that copy reports the error. Throws only when the driver fails.
  virtual bool device_range_known(DevPtr ptr, size_t bytes) {
    (void)ptr;
    (void)bytes;
    return false;
  }

  // --- copies and memsets: enqueued on `stream`, never waited for ---------
  // Reads src when the stream reaches the copy: at every replay when `s` is
  // capturing (the caller keeps src alive).
  virtual void copy_h2d_async(DevPtr dst, const void* src, size_t bytes, StreamHandle s) = 0;
  // For a capturing `s`: copies the bytes src holds now into host memory the
  // graph owns and frees with itself (its last instantiation destroyed and
  // its replays done), and records a copy from there; src may be reused on
  // return. Refuses with CAPTURE, recording nothing, where it cannot.
  virtual void copy_h2d_snapshot_async(DevPtr dst, const void* src, size_t bytes,
                                       StreamHandle s) = 0;
  virtual void copy_d2h_async(void* dst, DevPtr src, size_t bytes, StreamHandle s) = 0;
  virtual void copy_d2d_async(DevPtr dst, DevPtr src, size_t bytes, StreamHandle s) = 0;
  virtual void copy_2d_async(DevPtr dst, size_t dst_pitch, DevPtr src, size_t src_pitch,
                             size_t width_bytes, size_t height, StreamHandle s) = 0;
  virtual void memset_async(DevPtr dst, uint8_t value, size_t bytes, StreamHandle s) = 0;

  // --- red-zone support: one pass over many small ranges ------------------
  // Fills every range with `byte` and waits for it to finish.
  virtual void pattern_fill(const Range* ranges, size_t n, uint8_t byte) = 0;
  // mismatches[i] = how many bytes of ranges[i] differ from `byte`.
  virtual void pattern_count(const Range* ranges, size_t n, uint8_t byte,
                             uint32_t* mismatches) = 0;

  // A red-zone scan over a pad table the backend may keep between calls
  // (cuda keeps it on the device and uploads only what changed; this default
  // counts the whole table with pattern_count). table[0, n) is the whole
  // table now. Unless `whole` is set, the caller promises that only the
  // slots changed[0, nchanged) differ from the table of the last call that
  // returned normally; after a call that threw, or for a new table, it
  // passes whole. Appends to *hits one {slot, bad bytes} for every range
  // with a byte other than `byte`, in no order; waits for the pass. Not
  // thread safe: one caller at a time (core's PadMirror). Throws the
  // backend's error; *hits is then unspecified.
  struct PadHit {
    uint32_t slot;
    uint32_t bad_bytes;  // saturated at 2^32-1
  };
  virtual void pattern_count_table(const Range* table, size_t n, const uint32_t* changed,
                                   size_t nchanged, bool whole, uint8_t byte,
                                   std::vector<PadHit>* hits) {
    (void)changed;
    (void)nchanged;
    (void)whole;
    count_all(table, n, byte, hits);
  }

  // The red-zone check of freed pool blocks in stream order (core's
  // pad_check_ordered.cpp). Queues on stream s, after the work queued there
  // so far, one pass that for each range counts the bytes other than
  // `byte`, notes the first of them (offset and value) and writes `byte`
  // over the range, so that work ordered after it on s finds the pattern
  // there. Returns a ticket for pad_check_take, or 0 when this backend
  // cannot now (no kernels, or every result slot is in use): the caller
  // then checks synchronously. CAPTURE when s is capturing (nothing is
  // queued); otherwise throws the backend's error, nothing queued.
  struct PadCheck {
    uint64_t first_bad;  // offset of the first byte other than `byte` (when bad_bytes != 0)
    uint32_t bad_bytes;  // saturated at 2^32-1
    uint32_t found;      // the value of that byte
  };
  virtual uint64_t pad_check_async(const Range* ranges, size_t n, uint8_t byte, StreamHandle s) {
    (void)ranges;
    (void)n;
    (void)byte;
    (void)s;
    return 0;
  }
  // Whether ticket t's pass has finished (wait: blocks until it has). When
  // it has, out[0, n) holds one result per range and the ticket is spent.
  // Throws the backend's error (a lost device), the ticket spent too; a
  // ticket never issued or already spent is INVALID_ARGUMENT.
  virtual bool pad_check_take(uint64_t t, bool wait, PadCheck* out) {
    (void)t;
    (void)wait;
    (void)out;
    return false;
  }

  // --- streams and events ---------------------------------------------------
  virtual StreamHandle stream_create() = 0;  // non-blocking
  // The handle to use for a stream this library did not create, named by
  // its native value (a CUstream; 0 = the native API's NULL stream), for
  // metrale_stream_wrap. *owned: core must stream_destroy the handle when
  // the wrap ends (a stream the backend made to stand for the native one).
  // Default: UNSUPPORTED.
  virtual StreamHandle stream_wrap(uint64_t native, bool* owned) {
    (void)native;
    (void)owned;
    fail(METRALE_ERROR_UNSUPPORTED, "this backend cannot wrap a native stream");
  }
  virtual void stream_destroy(StreamHandle s) = 0;
  virtual void stream_synchronize(StreamHandle s) = 0;
  // Throws when the query itself fails (core then treats it as capturing).
  virtual bool stream_is_capturing(StreamHandle s) = 0;
  // Whether the calling thread is running work of stream s right now: a
  // host kernel (or a log callback it triggered) that called back into the
  // library. s == 0: work of any stream of this backend. A backend that
  // never runs work on a caller's thread (cuda) answers false.
  virtual bool in_stream_work(StreamHandle s) {
    (void)s;
    return false;
  }
  virtual EventHandle event_create(bool timing) = 0;
  virtual void event_destroy(EventHandle e) = 0;
  virtual void event_record(EventHandle e, StreamHandle s) = 0;
  virtual void event_synchronize(EventHandle e) = 0;
  virtual bool event_query(EventHandle e) = 0;  // true = complete
  virtual float event_elapsed_ms(EventHandle start, EventHandle end) = 0;
  virtual void stream_wait_event(StreamHandle s, EventHandle e) = 0;

  // --- graphs by stream capture ---------------------------------------------
  virtual void capture_begin(StreamHandle s) = 0;            // thread-local mode
  virtual GraphHandle capture_end(StreamHandle s) = 0;       // instantiated
  virtual void capture_abort(StreamHandle s) = 0;            // no-op if not capturing
  virtual void graph_launch(GraphHandle g, StreamHandle s) = 0;
  virtual void graph_destroy(GraphHandle g) = 0;

  // --- modules and kernels ----------------------------------------------------
  // UNSUPPORTED on the host backend.
  virtual ModuleHandle module_load(const void* image, size_t size) = 0;
  virtual void module_unload(ModuleHandle m) = 0;
  // NOT_FOUND when the module has no such function.
  virtual FuncHandle module_function(ModuleHandle m, const char* name) = 0;
  // Host backend only (UNSUPPORTED elsewhere): adds fn to module `m`, making
  // the module first when m is 0; returns the module. layout holds each
  // parameter's offset and size, laid out by core (the packing rule);
  // layout == nullptr means the parameters are unknown.
  virtual ModuleHandle host_module_add(ModuleHandle m, const char* name,
                                       metrale_host_kernel_fn fn, void* user,
                                       const ParamInfo* layout, size_t nparams) = 0;
  // The kernel's parameter layout; false when the backend cannot tell.
  virtual bool function_params(FuncHandle f, std::vector<ParamInfo>* out) = 0;
  virtual void launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                      StreamHandle s, void** params) = 0;
  virtual void launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes,
                             StreamHandle s, const void* args, size_t args_bytes) = 0;

  // --- memory annotations for tools (NVTX) -------------------------------------
  // So that a checker such as compute-sanitizer's memcheck sees the caching
  // pool's blocks as separate buffers, not only the chunks it got from
  // mem_alloc: a chunk is registered as a sub-allocator heap, a block handed
  // out as a region in it; an access to a heap byte outside every region is
  // reported. Best effort: the hooks never throw and never fail a caller.
  // Every backend but cuda keeps these no-op defaults (no tool to tell).
  //
  // METRALE_NVTX: unset = AUTO, 1 = ON, 0 = OFF.
  enum class Annotations { OFF, AUTO, ON };
  // Turns the annotations on (AUTO: only when a tool is attached to the
  // process; ON: whenever this backend can annotate) and returns whether
  // they are on (false: every hook below stays a no-op, and core need not
  // call them). Core calls it once, at context create, unless OFF.
  virtual bool mem_annotations_begin(Annotations mode) {
    (void)mode;
    return false;
  }
  // [ptr, ptr+bytes) is a chunk from mem_alloc that blocks are cut from.
  // Called after mem_alloc; the release before mem_free of the chunk (it
  // drops the chunk's regions too).
  virtual void mem_annotate_chunk(DevPtr ptr, size_t bytes) noexcept {
    (void)ptr;
    (void)bytes;
  }
  virtual void mem_annotate_chunk_release(DevPtr ptr) noexcept { (void)ptr; }
  // [ptr, ptr+bytes) inside an annotated chunk is handed out (a range in no
  // annotated chunk is ignored); the release is called with the same ptr
  // before the range goes back to the pool.
  virtual void mem_annotate_block(DevPtr ptr, size_t bytes) noexcept {
    (void)ptr;
    (void)bytes;
  }
  virtual void mem_annotate_block_release(DevPtr ptr) noexcept { (void)ptr; }

  // --- several devices: peers (issue 13) ----------------------------------------
  // Why this backend's device cannot reach `peer`'s memory directly, or ""
  // when it can (the same device always can). `peer` may be of another kind.
  // Throws only when the driver itself fails.
  virtual std::string peer_refusal(Backend& peer) {
    (void)peer;
    return "this backend has no peer access";
  }
  // Lets this device reach peer's memory directly (one direction). Already
  // enabled, or the same device: nothing to do. UNSUPPORTED naming why when
  // peer_refusal is not "".
  virtual void peer_access_enable(Backend& peer) {
    fail(METRALE_ERROR_UNSUPPORTED, peer_refusal(peer));
  }
  // Enqueues on stream s (this backend's) a copy of bytes from src (this
  // backend's memory) to dst (dst_owner's memory). Works without peer
  // access (the driver then stages it). Never waits; never called while s
  // captures (core refuses first).
  virtual void copy_peer_async(DevPtr dst, Backend& dst_owner, DevPtr src, size_t bytes,
                               StreamHandle s) {
    (void)dst;
    (void)dst_owner;
    (void)src;
    (void)bytes;
    (void)s;
    fail(METRALE_ERROR_UNSUPPORTED, "this backend has no peer copies");
  }

  // The driver's own stream behind s, for libraries that take one (NCCL's
  // cudaStream_t). UNSUPPORTED where there is none (host).
  virtual uint64_t native_stream(StreamHandle s) {
    (void)s;
    fail(METRALE_ERROR_UNSUPPORTED,
         "the host backend has no native stream: its streams run work in the caller's thread");
  }

  // The driver's own function behind f, for calls the library does not wrap
  // (cuFuncSetAttribute, cuLaunchKernelEx). UNSUPPORTED where there is none.
  virtual uint64_t native_function(FuncHandle f) {
    (void)f;
    fail(METRALE_ERROR_UNSUPPORTED,
         "the host backend has no native function: its kernels are C functions it calls itself "
         "(metrale_kernel_native answers on the cuda backend only)");
  }

  // --- faults -----------------------------------------------------------------
  // Checks whether the device context has a sticky fault (an illegal address,
  // say). Returns "" while healthy, else a message naming the fault. Never
  // waits for or synchronizes the device: the context may be shared with
  // other libraries' streams and captures.
  virtual std::string probe_fault() = 0;
  // Whether an error this backend threw might be the first sign of a sticky
  // fault it could not name, so that probe_fault() is worth calling. Errors
  // the backend classified (a bad argument, a capture error, a known
  // non-sticky driver code) never are; a sticky fault comes as CONTEXT_LOST.
  virtual bool may_hide_fault(const Error& e) const {
    return e.status() == METRALE_ERROR_DRIVER;
  }

 protected:
  // pattern_count over the whole table, the ranges with a bad byte appended
  // to *hits (the default pattern_count_table, and cuda's without kernels).
  void count_all(const Range* table, size_t n, uint8_t byte, std::vector<PadHit>* hits) {
    if (n == 0) return;
    std::vector<uint32_t> mismatches(n, 0);
    pattern_count(table, n, byte, mismatches.data());
    for (size_t i = 0; i < n; ++i) {
      if (mismatches[i] != 0) hits->push_back(PadHit{static_cast<uint32_t>(i), mismatches[i]});
    }
  }
};

// Factories. Throw NO_DRIVER / NO_DEVICE / DRIVER when the backend cannot start.
// device: the simulated device's ordinal, below host_device_count() (else
// NO_DEVICE naming METRALE_HOST_DEVICES).
std::unique_ptr<Backend> make_host_backend(int device = 0);
std::unique_ptr<Backend> make_cuda_backend(int device);
// How many devices each backend offers. Host: METRALE_HOST_DEVICES (1 to
// 1024, default 1; INVALID_ARGUMENT when malformed). Cuda: the driver's
// count; throws NO_DRIVER / NO_DEVICE / DRIVER as make_cuda_backend.
int host_device_count();
int cuda_device_count();

// Whether the calling thread is running a host kernel of any context (it
// holds a host stream's lock): for process-wide calls that must not wait
// from there (the cuda backend runs no host kernels).
bool this_thread_runs_host_kernel();

}  // namespace metrale::backend
