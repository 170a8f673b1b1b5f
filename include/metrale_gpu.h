/*
 * metrale_gpu.h — the C ABI of libmetrale_gpu.
 *
 * A GPU runtime library that tells you which line of your code holds the
 * memory, which kernel wrote past its buffer and what the driver said.
 * Everything is reached through opaque handles and status codes; no C++
 * type and no exception crosses this boundary.
 *
 * Conventions (they hold for every function unless its comment says else):
 * - Every function returns metrale_status_t; out-parameters come last and are
 *   written only on METRALE_OK (or where a status says they are).
 * - On any status but METRALE_OK, metrale_last_error_message() on the same
 *   thread says what was wrong, with which argument, and, for driver
 *   failures, the driver's code and name. A successful call leaves the
 *   message as it was.
 * - Handles belong to the context that made them and are valid until they
 *   are destroyed or the context is; destroy functions accept NULL. A
 *   handle is an opaque value, not an address: never dereference it. A
 *   destroyed context or handle, a handle of another context or kind, or
 *   any value this library did not return is METRALE_ERROR_INVALID_ARGUMENT
 *   forever (never a crash, never an action on another object): a handle
 *   value is never issued twice in a process (rule 2).
 * - A NULL stream argument means the context's default stream
 *   (metrale_default_stream()).
 * - Thread safety: every function that takes a context may be called from
 *   many threads at once, except where its comment says otherwise. A stream
 *   orders the work put on it; two threads putting work on the same stream
 *   get an order between them that neither chose.
 * - Once the context is lost (a sticky device fault, see
 *   metrale_context_fault), every function that would touch the device
 *   returns METRALE_ERROR_CONTEXT_LOST at once, naming the first fault.
 *   Host-side queries (ledger, counters, traces) still answer, and
 *   metrale_context_destroy still succeeds.
 *
 * Environment variables (read at metrale_context_create; they override the
 * options struct; a malformed value is METRALE_ERROR_INVALID_ARGUMENT):
 *   METRALE_BACKEND=auto|cuda|host    which backend to use
 *   METRALE_DEVICE=<n>                CUDA device ordinal
 *   METRALE_REDZONE=<bytes>           red-zone pad after each allocation (0 = off)
 *   METRALE_REDZONE_MIN_IDX=<seq>     pad only allocations with seq >= this
 *   METRALE_CHECKED=0|1               checked pointers on copies and memsets
 *   METRALE_DEBUG_SYNC=0|1            synchronize after every launch
 *   METRALE_LAUNCH_TRACE=0|1          record launches, d2d copies and memsets
 *   METRALE_KERNEL_TIMING=0|1         time every launch with events
 *   METRALE_LOG=trace|debug|info|warn|error|critical|off   log level (read
 *                                     at library load and at each create)
 */

/*
 * Rules of trust. Each rule below holds for both backends and has tests
 * that fail when it is broken.
 *
 * 1. A failed call did nothing.
 *    (rule 1: filled in by the capture work)
 *
 * 2. Handle lifetime.
 *    Every handle (context, stream, event, graph, kernel) is a value made
 *    of a slot and a serial from one process-wide counter shared by all
 *    kinds and contexts: no value is ever issued twice in a process, and
 *    handle values lie above 2^48, outside every user-space address (Go
 *    and Rust may keep them in pointer fields). A lookup reads only the
 *    process's context table and the named context's own handle tables,
 *    never freed memory. So, forever and whatever was created since:
 *    - a destroyed handle, a handle of another (live or destroyed) context,
 *      a handle of another kind, or a value the library never returned is
 *      METRALE_ERROR_INVALID_ARGUMENT in every function that takes it;
 *    - destroying a handle twice is INVALID_ARGUMENT the second time and
 *      leaves every other handle, including a newer one of the same kind,
 *      untouched; the default stream cannot be destroyed (INVALID_ARGUMENT);
 *    - a destroyed context's value is INVALID_ARGUMENT in every function
 *      (metrale_context_backend answers METRALE_BACKEND_AUTO,
 *      metrale_default_stream NULL, metrale_has_module 0);
 *    - a kernel of an unloaded module is METRALE_ERROR_NOT_FOUND (message:
 *      "belongs to a module that was unloaded") until its context is
 *      destroyed; a new lookup after a reload returns a new value.
 *    Threads: calls on different handles run in parallel. A call made while
 *    another thread destroys the same stream, event or graph is a race in
 *    the caller: it either acts on the handle as it was before the destroy
 *    or returns INVALID_ARGUMENT (the object's memory is kept until its
 *    context is destroyed, and a destroyed slot is reused only after 64
 *    others died after it); on the cuda backend, work the driver accepted
 *    for a stream it then destroys is the driver's business. Destroying a
 *    context while another thread uses it is not allowed; a call made after
 *    metrale_context_destroy returned is INVALID_ARGUMENT. Limits: 2^20
 *    live handles per kind per context and 2^20 live contexts; 2^41 handles
 *    per process in all (then creation answers OUT_OF_MEMORY).
 *
 * 3. Graph capture and caller memory.
 *    (rule 3: filled in by the capture work)
 *
 * 4. Concurrency with free and destroy.
 *    (rule 4: filled in by the race work)
 *
 * 5. What a log callback and a host kernel may call.
 *    (rule 5: filled in by the re-entry work)
 *
 * 6. Untrusted sizes, paths and environment values.
 *    (rule 6: filled in by the input work)
 *
 * 7. Host memory: what the driver says is pinned.
 *    (rule 7: filled in by the input work)
 *
 * 8. fork().
 *    The driver's state does not survive fork(). In the child, every
 *    context created before the fork is dead for good: every call with it
 *    (and so with its streams, events, graphs and kernels) returns
 *    METRALE_ERROR_INVALID_ARGUMENT with a message saying it was created
 *    before fork(), metrale_context_destroy included; its memory and device
 *    resources are left alone (the child cannot release the parent's). The
 *    child may create new contexts: host contexts work; a cuda context in a
 *    child of a process that had initialized CUDA gets whatever the driver
 *    answers (CUDA does not support that; use the host backend, or exec).
 *    The parent's contexts are unaffected. Call fork() while no other
 *    thread is inside this library.
 */
#ifndef METRALE_GPU_H
#define METRALE_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define METRALE_VERSION_MAJOR 0
#define METRALE_VERSION_MINOR 1
#define METRALE_VERSION_PATCH 0

/* ------------------------------------------------------------------ */
/* Types                                                               */
/* ------------------------------------------------------------------ */

typedef struct metrale_context metrale_context_t;
typedef struct metrale_stream metrale_stream_t;
typedef struct metrale_event metrale_event_t;
typedef struct metrale_graph metrale_graph_t;
typedef struct metrale_kernel metrale_kernel_t;

/** A device address. On the host backend it is a host address. */
typedef uint64_t metrale_devptr_t;

typedef struct metrale_dim3 {
  uint32_t x, y, z;
} metrale_dim3_t;

typedef enum metrale_status {
  METRALE_OK = 0,
  METRALE_ERROR_INVALID_ARGUMENT = 1, /* an argument is NULL, zero, out of range or unknown */
  METRALE_ERROR_OUT_OF_MEMORY = 2,    /* the device (or host) could not provide the bytes */
  METRALE_ERROR_NOT_FOUND = 3,        /* no such allocation, module, kernel or entry */
  METRALE_ERROR_NO_DRIVER = 4,        /* libcuda.so.1 missing, a stub, or cuInit failed */
  METRALE_ERROR_NO_DEVICE = 5,        /* the driver answers but has no such device */
  METRALE_ERROR_UNSUPPORTED = 6,      /* this backend or driver cannot do it */
  METRALE_ERROR_CONTEXT_LOST = 7,     /* a sticky device fault; the context is unusable */
  METRALE_ERROR_REDZONE_CORRUPTED = 8,/* a scan found overwritten red-zone pads */
  METRALE_ERROR_OUT_OF_BOUNDS = 9,    /* checked pointers: a range outside any live allocation */
  METRALE_ERROR_CAPTURE = 10,         /* stream capture is active, invalidated or absent */
  METRALE_ERROR_BUFFER_TOO_SMALL = 11,/* the caller's buffer holds less than the answer */
  METRALE_ERROR_DRIVER = 12,          /* any other driver failure; the message has its code */
  METRALE_ERROR_INTERNAL = 13         /* a bug in this library; please report it */
} metrale_status_t;

typedef enum metrale_backend {
  METRALE_BACKEND_AUTO = 0, /* cuda where a device answers, else host */
  METRALE_BACKEND_CUDA = 1,
  METRALE_BACKEND_HOST = 2
} metrale_backend_t;

typedef enum metrale_alloc_kind {
  METRALE_ALLOC_DEVICE = 0,  /* metrale_alloc */
  METRALE_ALLOC_MANAGED = 1  /* metrale_alloc_managed */
} metrale_alloc_kind_t;

typedef enum metrale_log_level {
  METRALE_LOG_TRACE = 0,
  METRALE_LOG_DEBUG = 1,
  METRALE_LOG_INFO = 2,
  METRALE_LOG_WARN = 3,
  METRALE_LOG_ERROR = 4,
  METRALE_LOG_CRITICAL = 5,
  METRALE_LOG_OFF = 6
} metrale_log_level_t;

/** One live ledger entry. `file` points into the context's string table and
 *  stays valid until the context is destroyed. */
typedef struct metrale_allocation {
  metrale_devptr_t ptr;      /* what the caller got */
  size_t bytes;              /* what the caller asked for */
  uint64_t seq;              /* creation index, from 0, per context */
  const char* file;          /* the caller's site */
  int line;
  metrale_alloc_kind_t kind;
  size_t redzone_bytes;      /* pad after the buffer (0 = none) */
} metrale_allocation_t;

/** One overwritten red-zone pad. */
typedef struct metrale_redzone_violation {
  metrale_devptr_t ptr;      /* the allocation's pointer */
  size_t bytes;              /* its size as asked */
  uint64_t seq;
  const char* file;          /* its allocation site (valid until context destroy) */
  int line;
  size_t first_bad_offset;   /* from the end of the buffer: 0 = the byte at ptr+bytes */
  size_t bad_bytes;          /* how many pad bytes differ from the pattern */
  uint8_t expected;          /* the pattern byte (METRALE_REDZONE_PATTERN) */
  uint8_t found;             /* what the first bad byte holds */
} metrale_redzone_violation_t;

/** The byte that red-zone pads are filled with. */
#define METRALE_REDZONE_PATTERN 0xA5u

/** Telemetry counters of one context. Set struct_size to
 *  sizeof(metrale_counters_t) before calling metrale_counters(). */
typedef struct metrale_counters {
  size_t struct_size;
  uint64_t launches;         /* kernel launches, graph replays not included */
  uint64_t graph_launches;
  uint64_t stream_syncs;     /* metrale_stream_synchronize and the library's own waits */
  uint64_t h2d_copies, h2d_bytes;
  uint64_t d2h_copies, d2h_bytes; /* d2h_copies is the seed's D2H tick count */
  uint64_t d2d_copies, d2d_bytes; /* 2D copies count here, width*height bytes */
  uint64_t memsets, memset_bytes;
  uint64_t allocs, alloc_bytes;   /* ledger allocations (device and managed) */
  uint64_t frees, free_bytes;
  uint64_t kernel_lookups, kernel_lookup_misses;
  uint64_t pinned_source_waits;   /* h2d_async calls that waited for a pinned source */
} metrale_counters_t;

typedef struct metrale_device_info {
  char name[256];
  int compute_major, compute_minor; /* 0.0 on the host backend */
  int sm_count;                     /* CPU count on the host backend */
  size_t total_memory;
  metrale_backend_t backend;
  int ordinal;
} metrale_device_info_t;

typedef enum metrale_trace_kind {
  METRALE_TRACE_LAUNCH = 0, /* a kernel launch */
  METRALE_TRACE_D2D = 1,    /* args: src, dst, bytes (2D: src, dst, width*height) */
  METRALE_TRACE_MEMSET = 2  /* args: ptr, value, bytes (async memsets) */
} metrale_trace_kind_t;

#define METRALE_TRACE_MAX_ARGS 8

/** One launch-trace entry. For launches, args holds each parameter's value
 *  widened to 64 bits where the kernel's parameter sizes are known (nargs of
 *  them, at most 8), else the first 64 bytes of a packed buffer as words. */
typedef struct metrale_trace_entry {
  metrale_trace_kind_t kind;
  const char* kernel;        /* "module::function"; NULL for copies and memsets */
  metrale_dim3_t grid, block;
  uint32_t shared_bytes;
  uint32_t nargs;
  uint64_t args[METRALE_TRACE_MAX_ARGS];
} metrale_trace_entry_t;

/** One kernel lookup, found or not. Strings valid until context destroy. */
typedef struct metrale_kernel_audit_entry {
  const char* module;
  const char* function;
  int found;
  const char* file;
  int line;
} metrale_kernel_audit_entry_t;

/** Per-kernel timing (kernel_timing on). */
typedef struct metrale_kernel_timing {
  const char* kernel;        /* "module::function" */
  uint64_t launches;
  double total_ms;
} metrale_kernel_timing_t;

/** Context options. Initialize with metrale_context_options_init(). */
typedef struct metrale_context_options {
  size_t struct_size;            /* sizeof(metrale_context_options_t) */
  metrale_backend_t backend;     /* default AUTO */
  int device;                    /* default 0 */
  size_t redzone_bytes;          /* default 0 (off) */
  uint64_t redzone_min_index;    /* default 0 */
  int checked_pointers;          /* default 0 */
  int debug_sync;                /* default 0 */
  int launch_trace;              /* default 0 */
  int kernel_timing;             /* default 0 */
  size_t trace_capacity;         /* entries kept by the launch trace and the kernel
                                    audit, newest kept; default 65536; 0 keeps none */
} metrale_context_options_t;

/* ------------------------------------------------------------------ */
/* Errors, version, logging (no context; thread-safe)                  */
/* ------------------------------------------------------------------ */

/** The enumerator's name ("METRALE_ERROR_NOT_FOUND"); "METRALE_UNKNOWN_STATUS"
 *  for a value outside the enum. Never NULL; static storage. */
const char* metrale_status_name(metrale_status_t status);

/** The message of the last failed call on this thread; "" when none failed.
 *  Never NULL; valid until the next call of this library on this thread. */
const char* metrale_last_error_message(void);

/** Writes the library's version. Any argument may be NULL. Always METRALE_OK. */
metrale_status_t metrale_version(int* major, int* minor, int* patch);

/** Sets the log level for every context. INVALID_ARGUMENT outside the enum. */
metrale_status_t metrale_log_set_level(metrale_log_level_t level);

/** Receives each log line (level, text without newline) instead of stderr.
 *  fn NULL restores stderr. fn may be called from any thread, concurrently,
 *  and must not call back into this library. Always METRALE_OK. */
typedef void (*metrale_log_fn)(metrale_log_level_t level, const char* message, void* user);
metrale_status_t metrale_log_set_callback(metrale_log_fn fn, void* user);

/* ------------------------------------------------------------------ */
/* Context                                                             */
/* ------------------------------------------------------------------ */

/** Fills *opts with the defaults. INVALID_ARGUMENT when opts is NULL. */
metrale_status_t metrale_context_options_init(metrale_context_options_t* opts);

/** Creates a context. opts may be NULL (defaults); environment variables
 *  override it. opts->struct_size must be a size this library knows.
 *  Statuses: INVALID_ARGUMENT (NULL out, bad struct_size, malformed env var),
 *  NO_DRIVER, NO_DEVICE (cuda asked for explicitly), OUT_OF_MEMORY, DRIVER.
 *  With AUTO, a missing driver or device falls back to host (logged once).
 *  The cuda backend uses the device's primary context, shared with the CUDA
 *  runtime. The caller owns *out and destroys it with metrale_context_destroy. */
metrale_status_t metrale_context_create(const metrale_context_options_t* opts,
                                        metrale_context_t** out);

/** Frees every allocation still on the ledger (a warning names their sites),
 *  every stream, event, graph and module the context made, and the context.
 *  NULL is OK. Succeeds on a lost context. INVALID_ARGUMENT when ctx is not
 *  a live context: destroyed already (a second destroy frees nothing, even
 *  when a new context was created since), created before fork() (rule 8),
 *  or not a context. Of two threads destroying the same ctx at once, one
 *  succeeds and the other gets INVALID_ARGUMENT. Not to be called while
 *  other threads use ctx; every handle of ctx is dead afterwards (rule 2). */
metrale_status_t metrale_context_destroy(metrale_context_t* ctx);

/** The backend the context runs on; METRALE_BACKEND_AUTO when ctx is NULL or
 *  not a live context (destroyed, from before fork(), not a context). */
metrale_backend_t metrale_context_backend(const metrale_context_t* ctx);

/** Makes ctx's device context current on the calling thread. Every other
 *  call does this by itself; this exists for code that then calls the
 *  driver or the CUDA runtime directly. */
metrale_status_t metrale_context_bind_thread(metrale_context_t* ctx);

/** METRALE_OK while the context is healthy; METRALE_ERROR_CONTEXT_LOST once
 *  a sticky fault was latched (the message names the first fault). */
metrale_status_t metrale_context_fault(metrale_context_t* ctx);

/* ------------------------------------------------------------------ */
/* Memory and the ledger                                               */
/* ------------------------------------------------------------------ */

/** Allocates device memory and records it on the ledger with the site
 *  file:line (file is copied). With red zones on and seq >= min index, a pad
 *  of redzone_bytes follows the buffer, filled with METRALE_REDZONE_PATTERN;
 *  the pointer is the one an unpadded allocation would give.
 *  Statuses: INVALID_ARGUMENT (NULL ctx/out, bytes 0), OUT_OF_MEMORY (the
 *  message names bytes asked, free/total memory and the three sites holding
 *  the most), CONTEXT_LOST, DRIVER. The caller frees with metrale_free. */
metrale_status_t metrale_alloc_at(metrale_context_t* ctx, size_t bytes, const char* file,
                                  int line, metrale_devptr_t* out);
#define metrale_alloc(ctx, bytes, out) metrale_alloc_at((ctx), (bytes), __FILE__, __LINE__, (out))

/** As metrale_alloc_at, for managed (unified) memory, attached globally; no
 *  red zone. On the host backend it is ordinary host memory. */
metrale_status_t metrale_alloc_managed_at(metrale_context_t* ctx, size_t bytes,
                                          const char* file, int line, metrale_devptr_t* out);
#define metrale_alloc_managed(ctx, bytes, out) \
  metrale_alloc_managed_at((ctx), (bytes), __FILE__, __LINE__, (out))

/** Takes dptr off the ledger, then frees it. dptr 0 is OK.
 *  Statuses: NOT_FOUND (not a live ledger allocation: never allocated or
 *  already freed), INVALID_ARGUMENT (an interior pointer: the message names
 *  the allocation it lies in), CONTEXT_LOST. A failed call leaves the ledger
 *  as it was. A driver status meaning the context is already gone is not an
 *  error. */
metrale_status_t metrale_free(metrale_context_t* ctx, metrale_devptr_t dptr);

/** Device memory that is never on the ledger and has no red zone: for
 *  arenas the caller manages. INVALID_ARGUMENT for bytes 0; OUT_OF_MEMORY. */
metrale_status_t metrale_alloc_arena(metrale_context_t* ctx, size_t bytes, metrale_devptr_t* out);
/** Frees what metrale_alloc_arena gave. 0 is OK; NOT_FOUND otherwise unknown. */
metrale_status_t metrale_free_arena(metrale_context_t* ctx, metrale_devptr_t dptr);

/** Page-locked host memory. INVALID_ARGUMENT for bytes 0; OUT_OF_MEMORY.
 *  The caller frees it with metrale_host_free_pinned. */
metrale_status_t metrale_host_alloc_pinned(metrale_context_t* ctx, size_t bytes, void** out);
/** NULL is OK; NOT_FOUND for a pointer not from metrale_host_alloc_pinned. */
metrale_status_t metrale_host_free_pinned(metrale_context_t* ctx, void* hptr);
/** Page-locks the caller's memory [hptr, hptr+bytes). INVALID_ARGUMENT for
 *  NULL, bytes 0, or a range overlapping one already pinned. */
metrale_status_t metrale_host_register(metrale_context_t* ctx, void* hptr, size_t bytes);
/** Undoes metrale_host_register; NOT_FOUND for a pointer not registered. */
metrale_status_t metrale_host_unregister(metrale_context_t* ctx, void* hptr);
/** *yes = 1 when all of [hptr, hptr+bytes) lies in one pinned or registered
 *  range, else 0. INVALID_ARGUMENT for NULL ctx/yes or bytes 0. */
metrale_status_t metrale_host_is_pinned(metrale_context_t* ctx, const void* hptr, size_t bytes,
                                        int* yes);
/** The device address of pinned or registered host memory (interior
 *  pointers too). NOT_FOUND when hptr is not pinned. */
metrale_status_t metrale_host_device_pointer(metrale_context_t* ctx, void* hptr,
                                             metrale_devptr_t* out);

/** Live bytes (as asked) and count of ledger allocations. */
metrale_status_t metrale_live_bytes(metrale_context_t* ctx, size_t* out);
metrale_status_t metrale_live_count(metrale_context_t* ctx, size_t* out);
/** Bytes reserved beyond what callers asked for, from size rounding (red-zone
 *  pads not counted), over live ledger allocations. */
metrale_status_t metrale_chunk_slack_bytes(metrale_context_t* ctx, size_t* out);

/** Copies up to cap live allocations, oldest first, into out; *count gets
 *  the number live. out may be NULL when cap is 0 (a size query: METRALE_OK).
 *  BUFFER_TOO_SMALL when 0 < cap < *count (out holds the first cap). */
metrale_status_t metrale_live_allocations(metrale_context_t* ctx, metrale_allocation_t* out,
                                          size_t cap, size_t* count);

/** Writes a text report of live bytes grouped by allocation site, largest
 *  first: at most top_n sites (0 = all), only sites holding >= min_mib MiB
 *  (0 = all), then a total line. *needed gets the bytes the text needs, NUL
 *  included. buf may be NULL when buflen is 0 (a size query: METRALE_OK).
 *  BUFFER_TOO_SMALL when buflen < *needed (buf holds a truncated, NUL-ended
 *  text). */
metrale_status_t metrale_alloc_report(metrale_context_t* ctx, size_t top_n, size_t min_mib,
                                      char* buf, size_t buflen, size_t* needed);

/** Frees every live ledger allocation, logs a warning naming their sites,
 *  and writes how many there were to *count (count may be NULL). */
metrale_status_t metrale_sweep_unreleased(metrale_context_t* ctx, size_t* count);

/* ------------------------------------------------------------------ */
/* Red zones                                                           */
/* ------------------------------------------------------------------ */

/** Checks every pad in one pass, after waiting for the work on the context's
 *  streams that are not capturing (work on streams this library did not
 *  create, e.g. the CUDA runtime's, must be finished by the caller; the
 *  device context as a whole is not synchronized, so a capture on another
 *  thread goes on). *count gets the number of overwritten pads;
 *  up to cap of them, oldest first, go to out (out may be NULL when cap is
 *  0). METRALE_OK when none is overwritten (and when red zones are off);
 *  METRALE_ERROR_REDZONE_CORRUPTED when any is (the message names the first);
 *  METRALE_ERROR_CAPTURE when pads are dirty but the default stream, which
 *  reads them back, is capturing (end or abort that capture first).
 *  A scan does not repair pads: see metrale_redzone_poison. */
metrale_status_t metrale_redzone_scan(metrale_context_t* ctx, metrale_redzone_violation_t* out,
                                      size_t cap, size_t* count);

/** Refills with the pattern the pads of live allocations whose seq lies in
 *  [lo, hi). INVALID_ARGUMENT when lo > hi. OK when red zones are off. */
metrale_status_t metrale_redzone_poison(metrale_context_t* ctx, uint64_t lo, uint64_t hi);

/* ------------------------------------------------------------------ */
/* Copies and memsets                                                  */
/* ------------------------------------------------------------------ */
/* A copy of 0 bytes is a no-op that returns METRALE_OK. With checked
 * pointers on, a device range outside every live allocation (ledger or
 * arena) is METRALE_ERROR_OUT_OF_BOUNDS before a byte moves. The host
 * backend always refuses device ranges outside its own memory with
 * METRALE_ERROR_INVALID_ARGUMENT. Synchronous copies run on the default
 * stream and wait for it. */

/** Host to device, synchronous. */
metrale_status_t metrale_copy_h2d(metrale_context_t* ctx, const void* src, size_t bytes,
                                  metrale_devptr_t dst);
/** Device to host, synchronous (default stream). */
metrale_status_t metrale_copy_d2h(metrale_context_t* ctx, metrale_devptr_t src, void* dst,
                                  size_t bytes);
/** Device to host on `stream`, waiting for that stream before returning. */
metrale_status_t metrale_copy_d2h_on_stream(metrale_context_t* ctx, metrale_devptr_t src,
                                            void* dst, size_t bytes, metrale_stream_t* stream);
/** Device to host on `stream` without waiting: dst is written when the
 *  stream reaches the copy; synchronize the stream before reading it. */
metrale_status_t metrale_copy_d2h_async(metrale_context_t* ctx, metrale_devptr_t src, void* dst,
                                        size_t bytes, metrale_stream_t* stream);
/** Device to device, synchronous. Traced. */
metrale_status_t metrale_copy_d2d(metrale_context_t* ctx, metrale_devptr_t src,
                                  metrale_devptr_t dst, size_t bytes);
/** Host to device on `stream`. The caller may reuse src on return: when src
 *  is pinned (the copy would read it later) the call waits for the stream
 *  and logs a warning once per context. */
metrale_status_t metrale_copy_h2d_async(metrale_context_t* ctx, const void* src, size_t bytes,
                                        metrale_devptr_t dst, metrale_stream_t* stream);
/** Host to device on `stream`, never waiting: the caller keeps src alive and
 *  unchanged until its next synchronization of the stream. */
metrale_status_t metrale_copy_h2d_async_retained(metrale_context_t* ctx, const void* src,
                                                 size_t bytes, metrale_devptr_t dst,
                                                 metrale_stream_t* stream);
/** Device to device on `stream`. Traced. On failure a backtrace is logged. */
metrale_status_t metrale_copy_d2d_async(metrale_context_t* ctx, metrale_devptr_t src,
                                        metrale_devptr_t dst, size_t bytes,
                                        metrale_stream_t* stream);
/** Pitched 2D device to device copy of height rows of width_bytes on
 *  `stream`. INVALID_ARGUMENT when a pitch is smaller than width_bytes. */
metrale_status_t metrale_copy_d2d_2d_async(metrale_context_t* ctx, metrale_devptr_t src,
                                           size_t src_pitch, metrale_devptr_t dst,
                                           size_t dst_pitch, size_t width_bytes, size_t height,
                                           metrale_stream_t* stream);
/** Sets bytes to value, synchronous. */
metrale_status_t metrale_memset(metrale_context_t* ctx, metrale_devptr_t dptr, uint8_t value,
                                size_t bytes);
/** Sets bytes to value on `stream`. Traced. */
metrale_status_t metrale_memset_async(metrale_context_t* ctx, metrale_devptr_t dptr,
                                      uint8_t value, size_t bytes, metrale_stream_t* stream);

/* ------------------------------------------------------------------ */
/* Modules and kernels                                                 */
/* ------------------------------------------------------------------ */

/** Loads a module image (PTX text, cubin or fatbin) under `name`. The image
 *  is read during the call only. INVALID_ARGUMENT (NULL, size 0, name in
 *  use), UNSUPPORTED on the host backend, DRIVER when the driver refuses it. */
metrale_status_t metrale_module_load_data(metrale_context_t* ctx, const char* name,
                                          const void* image, size_t size);
/** As metrale_module_load_data, reading the image from `path`. NOT_FOUND when
 *  the file cannot be read. */
metrale_status_t metrale_module_load_file(metrale_context_t* ctx, const char* name,
                                          const char* path);
/** Unloads a module; its kernel handles stay known to the context, but
 *  launching them is NOT_FOUND for good, even after a module of the same
 *  name is loaded again (look the kernel up again). NOT_FOUND when no
 *  module has that name. */
metrale_status_t metrale_module_unload(metrale_context_t* ctx, const char* name);
/** 1 when a module (loaded or host-registered) has that name, else 0 (also
 *  for bad arguments, which set the message). */
int metrale_has_module(metrale_context_t* ctx, const char* name);

/** Looks up module::func, caching it, and records the lookup (found or not)
 *  with the caller's site in the kernel audit. *kernel is owned by the
 *  context. NOT_FOUND for an unknown module or function. */
metrale_status_t metrale_kernel_get_at(metrale_context_t* ctx, const char* module,
                                       const char* func, const char* file, int line,
                                       metrale_kernel_t** kernel);
#define metrale_kernel_get(ctx, module, func, kernel) \
  metrale_kernel_get_at((ctx), (module), (func), __FILE__, __LINE__, (kernel))

/** What a host kernel receives. params is never NULL when the kernel was
 *  registered with parameter sizes (packed launches are unpacked for it);
 *  otherwise params is the caller's array for metrale_launch and NULL for
 *  metrale_launch_packed, where args/args_bytes hold the packed buffer. */
typedef struct metrale_host_kernel_call {
  metrale_dim3_t grid, block;
  uint32_t shared_bytes;
  void** params;
  const void* args;
  size_t args_bytes;
} metrale_host_kernel_call_t;

/** A host-backend kernel: called once per launch (it loops over the grid
 *  itself). Returning METRALE_ERROR_CONTEXT_LOST simulates a sticky device
 *  fault (the context latches it); any other non-OK status is returned by
 *  the launch. */
typedef metrale_status_t (*metrale_host_kernel_fn)(const metrale_host_kernel_call_t* call,
                                                   void* user);

/** Registers fn as module::func on the host backend (the module is created
 *  when new). Parameter sizes are unknown: params are passed through, and a
 *  launch captured in a graph keeps the caller's pointers.
 *  INVALID_ARGUMENT (NULL, name taken), UNSUPPORTED on the cuda backend. */
metrale_status_t metrale_module_register_host(metrale_context_t* ctx, const char* module,
                                              const char* func, metrale_host_kernel_fn fn,
                                              void* user);
/** As metrale_module_register_host, with the kernel's parameter sizes: the
 *  values are copied at launch (as on a GPU), packed buffers are checked
 *  against them and unpacked (each parameter aligned to the largest power of
 *  two dividing its size, at most 8), and the launch trace shows them. */
metrale_status_t metrale_module_register_host_params(metrale_context_t* ctx, const char* module,
                                                     const char* func, metrale_host_kernel_fn fn,
                                                     void* user, const size_t* param_sizes,
                                                     size_t nparams);

/** Launches kernel with params (an array of pointers to each argument; may
 *  be NULL for a kernel without parameters) on `stream`. INVALID_ARGUMENT
 *  for a zero dimension; CONTEXT_LOST when the launch revealed a sticky
 *  fault (latched); DRIVER otherwise. With debug_sync, waits for the stream
 *  and names the kernel on failure. */
metrale_status_t metrale_launch(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                metrale_dim3_t grid, metrale_dim3_t block, uint32_t shared_bytes,
                                metrale_stream_t* stream, void** params);
/** As metrale_launch with every argument packed in one buffer, laid out as
 *  the kernel's parameters are. Where the kernel's parameter layout is known
 *  (the driver's cuFuncGetParamInfo, or sizes given at host registration),
 *  args_bytes must equal it: else INVALID_ARGUMENT, nothing launched. */
metrale_status_t metrale_launch_packed(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                       metrale_dim3_t grid, metrale_dim3_t block,
                                       uint32_t shared_bytes, metrale_stream_t* stream,
                                       const void* args, size_t args_bytes);

/* ------------------------------------------------------------------ */
/* Streams and events                                                  */
/* ------------------------------------------------------------------ */

/** A new non-blocking stream, owned by the caller until stream_destroy. */
metrale_status_t metrale_stream_create(metrale_context_t* ctx, metrale_stream_t** out);
/** Destroys a stream (NULL is OK). INVALID_ARGUMENT for the default stream,
 *  for a stream destroyed already (a second destroy touches nothing else)
 *  and for one of another context. Of two threads destroying the same
 *  stream, one succeeds. */
metrale_status_t metrale_stream_destroy(metrale_context_t* ctx, metrale_stream_t* stream);
/** Waits for all work on the stream. CAPTURE while it is capturing. */
metrale_status_t metrale_stream_synchronize(metrale_context_t* ctx, metrale_stream_t* stream);
/** The context's own non-blocking stream; NULL when ctx is NULL or not a
 *  live context. Owned by the context. */
metrale_stream_t* metrale_default_stream(metrale_context_t* ctx);
/** 1 when the stream is capturing, else 0. A failed query (bad ctx, driver
 *  error) counts as capturing and returns 1. */
int metrale_stream_is_capturing(metrale_context_t* ctx, metrale_stream_t* stream);

#define METRALE_EVENT_DEFAULT 0u          /* with timing */
#define METRALE_EVENT_DISABLE_TIMING 1u   /* cheaper; elapsed_ms refuses it */
/** A new event. INVALID_ARGUMENT for unknown flags. */
metrale_status_t metrale_event_create(metrale_context_t* ctx, unsigned flags,
                                      metrale_event_t** out);
/** Records the event at the current end of `stream`'s work; recording again
 *  moves it. In a capture, the record becomes part of the graph. */
metrale_status_t metrale_event_record(metrale_context_t* ctx, metrale_event_t* event,
                                      metrale_stream_t* stream);
/** Waits until the work before the event's last record has completed (at
 *  once for an event never recorded). CONTEXT_LOST when that work faulted. */
metrale_status_t metrale_event_synchronize(metrale_context_t* ctx, metrale_event_t* event);
/** *done = 1 when all work before the record has completed, else 0. */
metrale_status_t metrale_event_query(metrale_context_t* ctx, metrale_event_t* event, int* done);
/** Destroys the event (NULL is OK); the handle is INVALID_ARGUMENT
 *  afterwards, a second destroy included (it touches no other event). */
metrale_status_t metrale_event_destroy(metrale_context_t* ctx, metrale_event_t* event);
/** Makes `stream` wait for the work recorded in `event`. */
metrale_status_t metrale_stream_wait_event(metrale_context_t* ctx, metrale_stream_t* stream,
                                           metrale_event_t* event);
/** Milliseconds between two recorded timing events. INVALID_ARGUMENT when
 *  either has timing disabled or was never recorded. */
metrale_status_t metrale_event_elapsed_ms(metrale_context_t* ctx, metrale_event_t* start,
                                          metrale_event_t* end, float* ms);

/* ------------------------------------------------------------------ */
/* Graphs                                                              */
/* ------------------------------------------------------------------ */

/** Starts capturing the work put on `stream` (thread-local capture mode).
 *  CAPTURE when it is already capturing. Not thread-safe per stream. */
metrale_status_t metrale_graph_begin_capture(metrale_context_t* ctx, metrale_stream_t* stream);
/** Ends the capture and instantiates the graph; the caller owns *graph.
 *  CAPTURE when the stream was not capturing or the capture was invalidated. */
metrale_status_t metrale_graph_end_capture(metrale_context_t* ctx, metrale_stream_t* stream,
                                           metrale_graph_t** graph);
/** Ends an active capture and drops what it recorded; OK when none is
 *  active. */
metrale_status_t metrale_graph_abort_capture(metrale_context_t* ctx, metrale_stream_t* stream);
/** Replays the graph on `stream`. */
metrale_status_t metrale_graph_launch(metrale_context_t* ctx, metrale_graph_t* graph,
                                      metrale_stream_t* stream);
/** NULL is OK. INVALID_ARGUMENT for a graph destroyed already (a second
 *  destroy touches no other graph) or of another context. */
metrale_status_t metrale_graph_destroy(metrale_context_t* ctx, metrale_graph_t* graph);

/* ------------------------------------------------------------------ */
/* Device                                                              */
/* ------------------------------------------------------------------ */

/** Fills *info: name, compute capability, SM count, total memory, backend,
 *  ordinal (on the host backend: the CPU, 0.0, the CPU count, physical RAM). */
metrale_status_t metrale_device_info(metrale_context_t* ctx, metrale_device_info_t* info);
/** The device's total memory (physical RAM on the host backend). */
metrale_status_t metrale_total_memory(metrale_context_t* ctx, size_t* bytes);
/** What this context can still get: the device's free memory plus what the
 *  library holds cached for reuse (nothing, in this version). */
metrale_status_t metrale_free_memory(metrale_context_t* ctx, size_t* bytes);
/** The device's own answer (cuMemGetInfo; the host's available memory). */
metrale_status_t metrale_device_free_memory(metrale_context_t* ctx, size_t* bytes);

/* ------------------------------------------------------------------ */
/* Telemetry                                                           */
/* ------------------------------------------------------------------ */

/** Copies the counters. INVALID_ARGUMENT when c is NULL or c->struct_size is
 *  not sizeof(metrale_counters_t). */
metrale_status_t metrale_counters(metrale_context_t* ctx, metrale_counters_t* c);
/** Sets every counter to 0 (the ledger, traces and timings are untouched). */
metrale_status_t metrale_counters_reset(metrale_context_t* ctx);

/** Turns the launch trace on (1) or off (0). Turning it on clears it. */
metrale_status_t metrale_launch_trace_enable(metrale_context_t* ctx, int on);
/** Copies up to cap trace entries, oldest first; *count gets the number held.
 *  Size query and BUFFER_TOO_SMALL as metrale_live_allocations. */
metrale_status_t metrale_launch_trace_read(metrale_context_t* ctx, metrale_trace_entry_t* out,
                                           size_t cap, size_t* count);
/** Every kernel lookup (newest trace_capacity kept), oldest first. */
metrale_status_t metrale_kernel_audit_read(metrale_context_t* ctx,
                                           metrale_kernel_audit_entry_t* out, size_t cap,
                                           size_t* count);
/** Turns per-kernel timing on or off. */
metrale_status_t metrale_kernel_timing_enable(metrale_context_t* ctx, int on);
/** Per-kernel launches and total time, in first-launch order. Waits for the
 *  timed launches to finish. */
metrale_status_t metrale_kernel_timings_read(metrale_context_t* ctx, metrale_kernel_timing_t* out,
                                             size_t cap, size_t* count);

#ifdef __cplusplus
}
#endif

#endif /* METRALE_GPU_H */
