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
 * options struct; a malformed value is METRALE_ERROR_INVALID_ARGUMENT naming
 * the variable; numbers are plain decimal digits, see rule 6):
 *   METRALE_BACKEND=auto|cuda|host    which backend to use
 *   METRALE_DEVICE=<n>                CUDA device ordinal
 *   METRALE_HOST_DEVICES=<n>          devices the host backend simulates (1 to
 *                                     1024, default 1); METRALE_DEVICE (or
 *                                     opts.device) picks one of them, as it
 *                                     picks a CUDA device; see "Several devices"
 *   METRALE_REDZONE=<bytes>           red-zone pad after each allocation (0 = off)
 *   METRALE_REDZONE_MIN_IDX=<seq>     pad only allocations with seq >= this
 *   METRALE_CHECKED=0|1               checked pointers on copies and memsets
 *   METRALE_DEBUG_SYNC=0|1            synchronize after every launch
 *   METRALE_LAUNCH_TRACE=0|1          record launches, d2d copies and memsets
 *   METRALE_KERNEL_TIMING=0|1         time every launch with events
 *   METRALE_POOL=0|1                  caching pool for metrale_alloc (rule 9)
 *   METRALE_QUARANTINE=<bytes>        freed-block quarantine budget (red zones on)
 *   METRALE_REDZONE_VERIFY_BATCH=<n>  freed padded blocks checked per batch
 *                                     (default 256; see "Freed pads")
 *   METRALE_REDZONE_VERIFY_BYTES=<bytes> block bytes that start a batch
 *                                     check (default 1 GiB)
 *   METRALE_REDZONE_VERIFY_ORDERED=0|1 batch checks queued in stream order
 *                                     (default 1; see "Freed pads")
 *   METRALE_REDZONE_REUSE=<n>         up to n owners of a pooled block share
 *                                     one check of its pad (0 .. 16; default
 *                                     1; 0 and 1: every free is checked; see
 *                                     "Freed pads")
 *   METRALE_STAGING_THRESHOLD=<bytes> pageable copies this large use staging (0 = off)
 *   METRALE_STAGING_BUFFER=<bytes>    bytes of one staging buffer
 *   METRALE_STAGING_BUFFERS=<n>       staging buffers in the ring (>= 2)
 *   METRALE_STAGING_THREADS=<n>       memcpy workers per staged copy (>= 1)
 *   METRALE_STAGING_STORES=auto|streaming|cached  how those workers store
 *                                     (auto: cached h2d, streaming d2h)
 *   METRALE_PINNED_POOL=0|1           cache freed pinned host blocks (default 1)
 *   METRALE_NVTX=0|1                  describe pooled blocks to a tool through
 *                                     NVTX (compute-sanitizer); unset: when
 *                                     a tool is attached, 1: always, 0: never;
 *                                     see "The caching pool"
 *   METRALE_EVENT_LOG=<path>          write the allocation event log there
 *                                     (see "The event log"; a path that
 *                                     cannot be opened fails the create)
 *   METRALE_LOG=trace|debug|info|warn|error|critical|off   log level (read
 *                                     at library load and at each create)
 *   METRALE_TEST_HOST_FAIL_FREE=<n>   test hook, host backend only: the n-th
 *                                     device free of each context created
 *                                     while it is set fails with
 *                                     METRALE_ERROR_DRIVER (0 = never); for
 *                                     suites that check what a failed driver
 *                                     free leaves behind. Not for production.
 *   METRALE_TEST_HOST_FAIL_PINNED=<n> test hook, host backend only: the n-th
 *                                     pinned host allocation the backend
 *                                     makes for each context created while
 *                                     it is set fails with OUT_OF_MEMORY
 *                                     (0 = never); shows which calls the
 *                                     pinned pool serves without a backend
 *                                     call. Not for production.
 *   METRALE_TEST_HOST_NO_PEER=0|1     test hook, host backend only: a simulated
 *                                     device created while it is 1 has no peer
 *                                     path to the others (peer access is
 *                                     refused, peer copies still work). Not for
 *                                     production.
 *   METRALE_TEST_HOST_REFILL_COUNTED=0|1 test hook, host backend only: each
 *                                     range the backend counts bad for a
 *                                     scan or check (contexts created while
 *                                     it is 1) is refilled with the byte it
 *                                     was counted against, as a concurrent
 *                                     metrale_redzone_poison could; shows
 *                                     METRALE_REDZONE_OFFSET_UNKNOWN. Not
 *                                     for production.
 */

/*
 * Rules of trust. Each rule below holds for both backends and has tests
 * that fail when it is broken.
 *
 * 1. A failed call did nothing.
 *    A call that returns any status but METRALE_OK has enqueued no work,
 *    recorded nothing into a capture, changed no ledger entry and moved no
 *    counter, launch-trace or timing entry: arguments, handles, ranges
 *    (checked pointers) and the capture state are all checked before any
 *    work is put on a stream, and counters and traces move only once the
 *    backend has taken the work. Exceptions: when the wait of a synchronous
 *    call fails (CONTEXT_LOST, DRIVER) its work was already enqueued and
 *    counted; a staged copy (staging_threshold) whose DMA or wait fails
 *    after its first piece has moved the pieces before it (not counted); a failed metrale_alloc has used up a sequence number; a host
 *    kernel that returns an error (host backend) has run; an allocation
 *    that fails with OUT_OF_MEMORY writes its "oom" line to an open event
 *    log, and metrale_event_log_close closes the log even when it returns
 *    INTERNAL (lines lost to a write error); with red zones and the pool
 *    on, a pooled allocation that fails with OUT_OF_MEMORY has run the
 *    check of freed pads (see "Freed pads") before its retry; and a pooled
 *    allocation that fails with OUT_OF_MEMORY has given the pool's cached
 *    chunks back to the driver before its retry (rule 9): reserved_bytes,
 *    cached_bytes and chunk_frees (metrale_pool_stats) show it, and the
 *    message says how many bytes it released; likewise a metrale_pool_trim
 *    that fails with OUT_OF_MEMORY may have done part of its releasing
 *    (chunks given back, the pinned cache emptied, freed pads checked and
 *    their blocks cached), and nothing else.
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
 *      a stream handle that metrale_stream_wrap returned n times (one native
 *      stream wrapped n times) dies at its n-th destroy, and the next
 *      destroy is INVALID_ARGUMENT;
 *    - a destroyed context's value is INVALID_ARGUMENT in every function
 *      (metrale_context_backend answers METRALE_BACKEND_AUTO,
 *      metrale_default_stream NULL, metrale_has_module 0);
 *    - a kernel of an unloaded module is METRALE_ERROR_NOT_FOUND (message:
 *      "belongs to a module that was unloaded") until its context is
 *      destroyed; a new lookup after a reload returns a new value; a
 *      launch racing the unload runs the kernel or is NOT_FOUND (the
 *      module stays loaded until 8 more were unloaded after it).
 *    Threads: calls on different handles run in parallel. A call made while
 *    another thread destroys the same stream, event or graph is a race in
 *    the caller: it either acts on the handle as it was before the destroy
 *    or returns INVALID_ARGUMENT (the object's memory is kept until its
 *    context is destroyed, and a destroyed slot is reused only after 64
 *    others died after it; likewise the driver's own stream or event object
 *    lives on until 64 more of its kind died after it, and a graph's until
 *    the launches that found it live have returned, so such a call never
 *    hands the driver a dead one); on the cuda backend, work the driver accepted
 *    for a stream it then destroys is the driver's business. Destroying a
 *    context while another thread uses it is not allowed; a call made after
 *    metrale_context_destroy returned is INVALID_ARGUMENT. Limits: 2^20
 *    live handles per kind per context and 2^20 live contexts; 2^41 handles
 *    per process in all (then creation answers OUT_OF_MEMORY).
 *
 * 3. Graph capture and caller memory.
 *    A graph never keeps a pointer into caller memory that the API told the
 *    caller it may reuse. While a stream captures:
 *    - calls that wait for it (copy_h2d, copy_d2h, copy_d2h_on_stream,
 *      copy_d2d, memset, stream_synchronize) return METRALE_ERROR_CAPTURE
 *      before recording anything; the caller may free their buffers;
 *    - copy_h2d_async copies src at the call into host memory the graph
 *      owns and frees with itself (on cuda: page-locked memory held by a
 *      user object of the graph, freed once the graph, its instantiation
 *      and its replays are done); the caller may reuse src on return;
 *    - copy_h2d_async_retained records a copy that reads src at every
 *      replay, and copy_d2h_async one that writes dst at every replay: the
 *      caller keeps that memory valid until it destroys the graph (on cuda
 *      this is what the driver itself does for pageable, pinned and
 *      registered host memory alike);
 *    - host kernels registered without parameter sizes see the caller's
 *      params array at replay (metrale_module_register_host);
 *    - metrale_graph_launch into a capturing stream is CAPTURE;
 *    - alloc, free, pinned host memory and waits for OTHER streams work on a
 *      thread that captures (the cuda backend steps into relaxed capture
 *      mode for them), the capture staying intact;
 *    - a capture in global mode on ANOTHER thread (not this library's:
 *      metrale_graph_begin_capture captures in thread-local mode; PyTorch's
 *      graphs are global) stays intact while this library queries events
 *      (metrale_event_query, the pool's and the red-zone check's own
 *      queries), which the cuda backend does in relaxed mode as well;
 *    - launches skip debug_sync's wait and kernel timing, red-zone pad fills
 *      (alloc, poison) run at once and are never recorded, and
 *      metrale_redzone_scan refuses with CAPTURE when it would need the
 *      capturing default stream.
 *
 * 4. Concurrency with free and destroy.
 *    Any thread may free while others allocate, free, scan, poison, sweep
 *    or launch. A free is exact: the ledger entry and the counters change
 *    at once and once per block (two racing frees of one pointer: one gets
 *    OK, the other NOT_FOUND). metrale_redzone_scan and
 *    metrale_redzone_poison work on a snapshot of the pads; a padded block
 *    freed during such a pass leaves the ledger at once, but its memory
 *    goes back to the device only when the passes open at its free end. So a pass never reads or writes
 *    freed memory, a concurrent free never makes it fail (no
 *    INVALID_ARGUMENT), and no new allocation can take a freed address
 *    while the pass may still look at it. A scan reports a pad only when
 *    the same allocation (same seq) was live from the snapshot until after
 *    its pad was read back: a block freed meanwhile is skipped, and never
 *    blamed on a block that came after it. metrale_sweep_unreleased counts
 *    only the blocks it took off the ledger itself, with their own size and
 *    site: after any mix of alloc, free and sweep, with nothing live,
 *    allocs == frees and alloc_bytes == free_bytes. Kernel timing never
 *    blocks a launch and holds bounded memory (metrale_kernel_timings_read
 *    says how). A free, a launch and an allocation without a pad never
 *    wait for a red-zone pass on another thread (on cuda an allocation with
 *    a pad may wait for the device work of one pass: they share the
 *    red-zone stream). metrale_context_destroy must be the last call on its
 *    context: no other thread may still be inside a call on it.
 *
 * 5. What a log callback and a host kernel may call.
 *    Log callback (both backends): the library holds no lock of its own
 *    while it runs, so it may call any function of this library, on any
 *    context, with two exceptions that return INVALID_ARGUMENT and do
 *    nothing: metrale_log_set_callback (it would wait for its own caller)
 *    and metrale_context_destroy (the line may come from a call on that
 *    context still running below the callback). A line that a call made
 *    from inside the callback logs, on the same thread, goes to stderr,
 *    never into the callback again: no recursion. metrale_log_set_callback
 *    returns only when no call of the old callback is running, so its
 *    user pointer may be freed at once.
 *    Host kernel (host backend; the cuda backend has none): it runs as work
 *    of its stream, in the launching thread, and may call the library.
 *    Calls that would wait for that stream, i.e. for the kernel itself,
 *    return INVALID_ARGUMENT ("called from a host kernel ...") before doing
 *    anything: metrale_stream_synchronize of it, the synchronous copies and
 *    memsets on it (metrale_copy_h2d, copy_d2d and memset use the default
 *    stream; copy_d2h_on_stream its stream; copy_h2d_async from pinned
 *    memory its stream), a launch with debug_sync on it,
 *    metrale_event_synchronize of an event another thread recorded on it
 *    while the kernel runs, metrale_stream_wait_event of such an event by
 *    another stream, and metrale_redzone_scan (it waits for every stream
 *    of the context).
 *    So do metrale_stream_destroy of its stream and metrale_context_destroy
 *    of its context: the launch still uses them. So does
 *    metrale_log_set_callback: it waits for running callbacks, and one on
 *    another thread may be waiting for the kernel's stream. Everything
 *    else works:
 *    memory, ledger and telemetry calls, async work on any stream (on its
 *    own stream it runs at once, nested, before the kernel returns),
 *    waits for other streams, events, captures, other contexts. Two host
 *    kernels that wait for (or put work on) each other's streams never
 *    deadlock: the call that would close the cycle returns INVALID_ARGUMENT
 *    ("... would deadlock") and the other completes after it. A log
 *    callback run from inside a host kernel obeys both rules.
 *    Memory a running host kernel uses is not pulled from under it: as
 *    cuMemFree waits for the device's work, the host backend gives freed
 *    device memory (metrale_free with the pool off, a chunk the pool lets
 *    go) back to the C heap only once every host kernel running on
 *    another thread at the free has returned. The free itself returns at
 *    once (from a host kernel too), and the pointer is invalid at once.
 *    Should the process have no memory left to queue that release behind
 *    a running kernel, the free still succeeds but the block is never
 *    given back (a leak, never a free under the kernel), and a warning
 *    is logged naming its address.
 *
 * 6. Untrusted sizes, paths and environment values.
 *    A size, path or variable from the caller is checked before it is used,
 *    and a bad one gets a status within the call, never a hang, a crash, a
 *    wrapped computation or memory that grows without bound.
 *    - Numeric environment variables (METRALE_DEVICE, METRALE_REDZONE,
 *      METRALE_REDZONE_MIN_IDX, METRALE_TEST_HOST_FAIL_FREE,
 *      METRALE_TEST_HOST_FAIL_PINNED) accept ASCII
 *      digits only, up to the field's maximum: " 5", "-1", " -1", "+5",
 *      "1x", "0x10" and values past the maximum are INVALID_ARGUMENT at
 *      metrale_context_create, the message naming the variable. Booleans
 *      accept exactly "0" or "1"; an empty value counts as unset.
 *    - metrale_module_load_file reads regular files only: the path is opened
 *      without blocking (a FIFO never waits for a writer) and the opened file
 *      is checked, so a directory, FIFO, socket or device (/dev/zero) is
 *      INVALID_ARGUMENT at once; so is an empty file or one larger than
 *      METRALE_MODULE_FILE_MAX_BYTES (1 GiB, refused before a byte is read).
 *      A path that cannot be opened is NOT_FOUND.
 *    - metrale_launch_packed on a kernel whose parameter layout is unknown
 *      refuses args_bytes above METRALE_PACKED_ARGS_MAX_BYTES (4096, the
 *      driver's classic parameter limit) with INVALID_ARGUMENT; where the
 *      layout is known args_bytes must match it exactly.
 *    - Parameter layouts (metrale_param_layout, metrale_module_register_host_layout,
 *      metrale_module_register_host_params, metrale_launch_packed_layout)
 *      take at most 32764 parameters (the most bytes of parameters a CUDA
 *      kernel takes) of 1..4096 bytes each; the count, alignments and
 *      offsets are checked before any is used.
 *    - A host range of a copy (src of an h2d, dst of a d2h) that wraps past
 *      the end of the address space is INVALID_ARGUMENT.
 *    - metrale_alloc_report's min_mib is compared without overflow: a min_mib
 *      whose MiB exceed 2^64 bytes selects no site (the total line remains).
 *    - Failed kernel lookups keep their names, and every lookup its file, in
 *      the kernel audit only within a fixed budget (about 1 MiB per
 *      context); past it the audit entry's module, function or file reads
 *      "<name not kept: ...>", while the error message still names them.
 *      Lookups of ever new names or files therefore cannot grow the
 *      context's memory for its whole life.
 *
 * 7. Host memory: what the driver says is pinned.
 *    Host memory counts as pinned when it was pinned by anyone in the
 *    process: this context, another context, the CUDA runtime or PyTorch's
 *    pin_memory. The context's own registry answers first; otherwise the
 *    cuda backend asks the driver (cuPointerGetAttributes: memory type host,
 *    followed across allocations) and the host backend its process-wide
 *    record of pinned ranges. A range is pinned only when all its bytes are.
 *    The exception is what a pinned pool holds (opts.pinned_pool): a block
 *    freed into it, and the bytes of a block past those asked, are not
 *    pinned to any context of the process, though the driver keeps them
 *    page-locked.
 *    This decides metrale_host_is_pinned, metrale_host_device_pointer and
 *    whether metrale_copy_h2d_async must wait before returning (a pinned
 *    source is read by DMA after the call). The driver is also the judge
 *    of faults: an error the driver classifies as plain (INVALID_VALUE, a
 *    block of 2048 threads, LAUNCH_OUT_OF_RESOURCES, NOT_FOUND, ...) is
 *    returned as is and never latches the context; a sticky fault (illegal
 *    address, trap, misaligned address, ECC error, ...) is CONTEXT_LOST at
 *    once. Only a code the library cannot classify is probed, and the probe
 *    never synchronizes the device context (that would stall every stream
 *    of the process and break other threads' captures): a sticky fault is
 *    returned by any later call, so one call that waits for nothing tells.
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
 *
 * 9. The caching pool and stream order.
 *    With the pool on (the default; pool = 0 or METRALE_POOL=0 turns it
 *    off), metrale_alloc takes device memory from chunks the pool got from
 *    the driver (2 MiB chunks for sizes up to 1 MiB, 20 MiB or own-size
 *    chunks above), rounded up to 512 bytes; metrale_free gives it back to
 *    the pool, not to the driver. Managed memory and arenas never use it.
 *    - Every pooled block is ordered on one stream, its own: the default
 *      stream for metrale_alloc, s for metrale_alloc_async. Freed on its
 *      own stream (metrale_free, or metrale_free_async on that stream) it
 *      is handed out again at once to allocations on that stream, which
 *      run after the free in its order, and to other streams only once an
 *      event recorded after the free has completed. Freed with
 *      metrale_free_async on ANOTHER stream, it stays with its own stream's
 *      cache, reusable (there too) once an event recorded on the freeing
 *      stream has completed (torch's rule; a stream that only frees would
 *      otherwise hoard blocks that never merge).
 *    - So the caller orders every use of a block on ANOTHER stream before
 *      its free (an event the freeing stream waits for, a synchronize), or
 *      marks it with metrale_record_stream, or frees it with
 *      metrale_free_async on the stream that used it last; otherwise a later
 *      allocation may get memory a kernel still reads or writes (this is
 *      PyTorch's rule). With the pool off, a free is the driver's.
 *    - The ledger is the pool's table: entries, sites, red zones, checked
 *      pointers, scans, poison and sweeps work on pooled blocks exactly as
 *      on driver allocations; an entry's reserved bytes are its block's
 *      size, so metrale_chunk_slack_bytes is the pool's real rounding.
 *      metrale_free_memory counts what the pool holds cached. Short of host
 *      memory for the bookkeeping of a split, the pool hands a free block
 *      out whole (its reserved bytes then exceed the usual rounding) rather
 *      than fail an allocation it can serve.
 *    - Red zones: a pooled block's pad is filled on its stream, after the
 *      previous owner's work there; metrale_alloc also waits for that fill,
 *      so its memory may be used on any stream at once, as before. A
 *      padded block freed to the pool is handed out again only after the
 *      batch check of its pad (see "Freed pads", after
 *      metrale_redzone_scan), which waits for the streams it was freed and
 *      used on; a block that passed needs no new fill when the new pad
 *      lies in the range it checked, so no fill and no wait then.
 *    - Out of memory: the pool waits for the frees not yet known complete
 *      (with none of the library's locks held: the work waited for may be
 *      a host kernel that allocates), gives its cached chunks back to the
 *      driver and retries once, with one more such round when other
 *      threads freed meanwhile; then OUT_OF_MEMORY, the message naming the
 *      sites that hold the most and the pool's cached and in-use bytes.
 *    - Capture: allocating while the stream captures is allowed: the pool
 *      hands out only memory whose last use has completed (or a new chunk)
 *      and records nothing into the graph. A pooled block freed while the
 *      stream it is freed on captures leaves the ledger at once (OK), but
 *      goes back to the pool only when that capture ends or is aborted, so
 *      nothing the graph was recorded with is handed out during the
 *      capture. Keep a block the graph uses allocated while the graph may
 *      replay, as with driver memory.
 *    - metrale_stream_destroy waits for the work of that stream before the
 *      pool hands out what it freed or used; its cached blocks pass to the
 *      default stream. With red zones on it also waits for a red-zone check
 *      of freed blocks that another thread is running (that check may
 *      still free blocks on the stream), and blocks freed there that still
 *      wait for their check or sit in the quarantine pass to the default
 *      stream after the stream's work; called from a host kernel it does
 *      not wait, and the check's end completes the pool's part. A red-zone
 *      or quarantine scan on another thread never delays a destroy beyond
 *      a few driver calls (it waits on events of its own). Host backend:
 *      when the stream's work waits for the destroying thread (a host
 *      kernel destroying a stream whose kernel waits for its own), the
 *      destroy returns OK at once and the stream's blocks stay ordered on
 *      its work; the pool's part is finished by a later stream destroy,
 *      metrale_pool_trim or the context's destroy. The same holds, on any
 *      backend, for a stream that calls racing its destroy keep freeing on
 *      (the pool never waits for a stream with its lock held). The pool's waits in
 *      trim and the out-of-memory retry skip such a stream likewise.
 *    - Thread-safe: one lock guards the pool; a chunk allocation from the
 *      driver is made with it held.
 */
#ifndef METRALE_GPU_H
#define METRALE_GPU_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define METRALE_VERSION_MAJOR 0
#define METRALE_VERSION_MINOR 2
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
/* seq is the seed's ALLOC_SEQ: each metrale_alloc call takes the next index
 * from 0 (a failed call uses one up too), and METRALE_REDZONE_MIN_IDX,
 * metrale_redzone_poison and violations count in it. Managed allocations
 * take no index of their own (they never get a pad): their seq is the index
 * the next metrale_alloc will get, so mixing them in does not change which
 * allocation MIN_IDX picks. Listed oldest first, seq never decreases. */
typedef struct metrale_allocation {
  metrale_devptr_t ptr;      /* what the caller got */
  size_t bytes;              /* what the caller asked for */
  uint64_t seq;              /* red-zone creation index, per context (see above) */
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
  size_t first_bad_offset;   /* from the end of the buffer: 0 = the byte at ptr+bytes;
                                METRALE_REDZONE_OFFSET_UNKNOWN: see there */
  size_t bad_bytes;          /* how many pad bytes differ from the pattern */
  uint8_t expected;          /* the pattern byte (METRALE_REDZONE_PATTERN) */
  uint8_t found;             /* what the first bad byte holds (0 when unknown) */
} metrale_redzone_violation_t;

/** first_bad_offset of a violation (and of a metrale_use_after_free_t)
 *  whose bad bytes were counted but were gone when the library read the
 *  bytes back to name the first: something rewrote them in between (a
 *  metrale_redzone_poison on another thread refilling the pad). bad_bytes
 *  is then what the count saw and found is 0: no look saw that byte. */
#define METRALE_REDZONE_OFFSET_UNKNOWN ((size_t)-1)

/** The byte that red-zone pads are filled with. */
#define METRALE_REDZONE_PATTERN 0xA5u

/** Telemetry counters of one context. Set struct_size to
 *  sizeof(metrale_counters_t) before calling metrale_counters(). Fields are
 *  only ever added at the end: a caller built against an older header (a
 *  struct_size that ends before timings_dropped) gets the fields it knows. */
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
  uint64_t timings_dropped;       /* launches left untimed by the caps that
                                     metrale_kernel_timings_read documents */
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
/* The largest trace_capacity (metrale_context_options_t): 4Mi entries. Both
 * rings grow as entries come, so a trace of that many launches holds about
 * 4Mi * sizeof(metrale_trace_entry_t) bytes, plus the kernel audit's. */
#define METRALE_TRACE_CAPACITY_MAX (1u << 22)

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

/** One kernel lookup, found or not. Strings valid until context destroy.
 *  Past a per-context budget of names (rule 6), a failed lookup's module,
 *  function and file, and a found one's file, read "<name not kept: too
 *  many distinct lookup names>"; a name the library had no host memory to
 *  copy reads "<name not kept: out of host memory>" (the lookup's outcome
 *  stands). */
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

/** Defaults of the staging options, measured on an H200 host (16 cores;
 *  bench/results/2026-12-03-r6-staging-nvidia-h200.md, rows
 *  copy_*_1GiB_pageable/library_b<n>_<size>_t<threads>_<stores>, every
 *  setting interleaved in one run): 8 buffers of 4 MiB and 12 threads
 *  moved 1 GiB at 50.7 GB/s h2d (cached stores) and 53.2 GB/s d2h
 *  (streaming stores; pageable, unstaged: 7.2 and 14.5; pinned: 55.4).
 *  The threshold: a copy shorter than 8 buffers is cut into 8 pieces so
 *  that its memcpy overlaps its DMA, and h2d below 128 MiB streams its
 *  stores; so staged, copies from 512 KiB on beat the direct copy in both
 *  directions, in each of three runs (1 MiB: 0.68-0.74x its time; 256 KiB:
 *  even; bench/results/2026-12-04-staging-stores-nvidia-h200.md). The
 *  threads are capped at the machine's core count. The ring pins buffers
 *  x bytes per context. How the host side stores
 *  (METRALE_STAGING_STORES): see the README. */
#define METRALE_STAGING_DEFAULT_THRESHOLD (1u << 20)
#define METRALE_STAGING_DEFAULT_BUFFER_BYTES (4u << 20)
#define METRALE_STAGING_DEFAULT_BUFFERS 8u
#define METRALE_STAGING_DEFAULT_THREADS 12u

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
  int kernel_timing;             /* default 0; bounded: see metrale_kernel_timings_read */
  size_t trace_capacity;         /* entries kept by the launch trace and the kernel
                                    audit, newest kept; default 65536; 0 keeps none;
                                    at most METRALE_TRACE_CAPACITY_MAX (else
                                    metrale_context_create: INVALID_ARGUMENT) */
  /* Fields below were added in 0.2; a struct_size that ends before `pool`
   * (the 0.1 layout) is accepted and these take their defaults. */
  int pool;                      /* default 1: metrale_alloc serves device memory
                                    from the stream-ordered caching pool (rule 9);
                                    0: every allocation is a driver allocation */
  size_t quarantine_bytes;       /* default 0; with red zones on, freed pooled
                                    blocks are filled and held back up to this
                                    many bytes so a scan sees use after free */
  size_t staging_threshold;      /* copies of at least this many bytes from or to
                                    pageable host memory go through pinned
                                    staging buffers (see "Copies and memsets");
                                    0 = off; default
                                    METRALE_STAGING_DEFAULT_THRESHOLD */
  size_t staging_buffer_bytes;   /* bytes of one staging buffer, the piece one
                                    DMA moves (4096 .. 4 GiB); default
                                    METRALE_STAGING_DEFAULT_BUFFER_BYTES */
  uint32_t staging_buffers;      /* staging buffers in the ring (2 .. 1024;
                                    buffers x bytes <= 4 GiB); the ring is
                                    page-locked on the first staged copy and
                                    freed at context destroy; default
                                    METRALE_STAGING_DEFAULT_BUFFERS */
  uint32_t staging_threads;      /* threads that split the host memcpy of each
                                    piece, the calling thread included (1 .. 64;
                                    threads - 1 are started on first use and
                                    live until context destroy); default
                                    METRALE_STAGING_DEFAULT_THREADS */
  int pinned_pool;               /* default 1: metrale_host_alloc_pinned reuses
                                    freed pinned blocks of recurring sizes
                                    (size classes: 4 KiB multiples up to
                                    16 KiB, then 4 per power of two; whole
                                    blocks, no splitting); at most 256 MiB
                                    stay cached, the oldest freed go back to
                                    the driver beyond that, and a request
                                    above 256 MiB is never cached; 0: every
                                    call is cuMemHostAlloc / cuMemFreeHost */
} metrale_context_options_t;

/* ------------------------------------------------------------------ */
/* Errors, version, logging (no context; thread-safe)                  */
/* ------------------------------------------------------------------ */

/** The enumerator's name ("METRALE_ERROR_NOT_FOUND"); "METRALE_UNKNOWN_STATUS"
 *  for a value outside the enum. Never NULL; static storage. */
const char* metrale_status_name(metrale_status_t status);
/** The enumerator's name ("METRALE_BACKEND_HOST"); "METRALE_UNKNOWN_BACKEND"
 *  for a value outside the enum. Never NULL; static storage; thread-safe. */
const char* metrale_backend_name(metrale_backend_t backend);

/** The message of the last failed call on this thread; "" when none failed.
 *  Never NULL; valid until the next call of this library on this thread. */
const char* metrale_last_error_message(void);

/** Writes the library's version. Any argument may be NULL. Always METRALE_OK. */
metrale_status_t metrale_version(int* major, int* minor, int* patch);

/** Sets the log level for every context. INVALID_ARGUMENT outside the enum. */
metrale_status_t metrale_log_set_level(metrale_log_level_t level);

/** Receives each log line (level, text without newline) instead of stderr.
 *  fn NULL restores stderr. fn may be called from any thread, concurrently,
 *  with no lock of this library held. It may call this library (rule 5):
 *  lines logged by those calls on the callback's thread go to stderr, not
 *  back into fn; metrale_log_set_callback and metrale_context_destroy are
 *  refused from inside fn with INVALID_ARGUMENT.
 *  Returns only once no call of the previous callback is running on any
 *  thread, so the previous user pointer may be freed when it returns.
 *  METRALE_OK; INVALID_ARGUMENT (nothing changed) when called from inside
 *  the callback, where that wait would wait for its own caller.
 *  Thread-safe. */
typedef void (*metrale_log_fn)(metrale_log_level_t level, const char* message, void* user);
metrale_status_t metrale_log_set_callback(metrale_log_fn fn, void* user);

/* ------------------------------------------------------------------ */
/* Context                                                             */
/* ------------------------------------------------------------------ */

/** Fills the first struct_size bytes of *opts with the defaults and sets
 *  opts->struct_size. struct_size is sizeof(metrale_context_options_t) or
 *  the size of an older layout (offsetof(metrale_context_options_t, pool),
 *  0.1): no byte past it is written. INVALID_ARGUMENT when opts is NULL or
 *  struct_size is neither. */
metrale_status_t metrale_context_options_init_sized(metrale_context_options_t* opts,
                                                    size_t struct_size);
/** The function a caller built against 0.1 links to (and FFI bindings that
 *  declare the 0.1 layout): it writes only that layout. C and C++ code
 *  compiled with this header calls it through the macro below, which passes
 *  the current size. */
metrale_status_t metrale_context_options_init(metrale_context_options_t* opts);
#define metrale_context_options_init(opts) \
  metrale_context_options_init_sized((opts), sizeof(metrale_context_options_t))

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
 *  With red zones on, first logs at error level (and to the event log) what
 *  a scan would have found in freed memory: overwritten pads of the blocks
 *  freed so far (also those still quarantined or reused unchecked; with the
 *  pool off, only those still quarantined: a driver allocation's pad is not
 *  checked at its free, see "Freed pads") and writes into quarantined
 *  buffers. NULL is OK. Succeeds on a lost context. INVALID_ARGUMENT when ctx is not
 *  a live context: destroyed already (a second destroy frees nothing, even
 *  when a new context was created since), created before fork() (rule 8),
 *  or not a context. Of two threads destroying the same ctx at once, one
 *  succeeds and the other gets INVALID_ARGUMENT. Not to be called while
 *  other threads use ctx; every handle of ctx is dead afterwards (rule 2).
 *  INVALID_ARGUMENT, nothing freed, from inside the log callback and from a
 *  host kernel running on a stream of ctx (rule 5). */
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

/* Call sites. Every function that takes `const char* file, int line` (the
 * _at functions) copies file and never interprets it; the ledger, red-zone
 * and quarantine reports and the kernel audit give it back as given. The
 * bindings pass one format: the source path relative to the root of the
 * project its build tool compiled, then the line.
 *   C/C++: __FILE__ as the compiler was given it (the macros below); Meson
 *     passes paths relative to the build directory ("../src/main.c").
 *   Rust:  Location::caller(), as file!(): relative to the cargo workspace
 *     root, which for a lone crate is the crate root ("src/main.rs").
 *   Go:    relative to the module root, the directory holding go.mod
 *     ("examples/tour/main.go"); absolute when that root cannot be found
 *     at run time (a binary moved away from its sources, unless it was
 *     built with -trimpath).
 * Go passes "?" and line 0 for a site it cannot find. */

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

/** Takes dptr off the ledger, then frees it (file:line, copied, is the
 *  freeing site the quarantine reports; NULL: unknown). dptr 0 is OK.
 *  Statuses: NOT_FOUND (not a live ledger allocation: never allocated or
 *  already freed), INVALID_ARGUMENT (an interior pointer: the message names
 *  the allocation it lies in), CONTEXT_LOST, DRIVER (the driver refused the
 *  free). A failed call leaves the ledger as it was: when the driver refuses,
 *  the entry, its red-zone pad, its checked-pointer bounds and the counters
 *  are put back exactly (the memory is still the driver's, so no other
 *  allocation can have taken its address meanwhile). A driver status meaning
 *  the context is already gone is not an error. Thread-safe: of several
 *  threads freeing the same pointer at once exactly one succeeds and frees
 *  it once; the others get NOT_FOUND. Also safe against a red-zone scan or
 *  poison running on another thread: the block leaves the ledger and the
 *  counters at once; if it has a pad, its memory goes back to the device
 *  when that pass ends (rule 4; a driver refusal then is logged). */
metrale_status_t metrale_free_at(metrale_context_t* ctx, metrale_devptr_t dptr, const char* file,
                                 int line);
/** metrale_free_at without a site (what binaries built against 0.1 call).
 *  C and C++ code compiled with this header calls metrale_free_at through
 *  the macro below, so the quarantine can name the line that freed. */
metrale_status_t metrale_free(metrale_context_t* ctx, metrale_devptr_t dptr);
#define metrale_free(ctx, dptr) metrale_free_at((ctx), (dptr), __FILE__, __LINE__)

/* ------------------------------------------------------------------ */
/* The caching pool (rule 9)                                           */
/* ------------------------------------------------------------------ */

/* Tools. compute-sanitizer's memcheck sees only the pool's chunks, which
 * are driver allocations, so an access to a chunk byte that no live block
 * covers would go unreported. On the cuda backend the library therefore
 * describes the pool through the NVTX memory API: each chunk is a
 * sub-allocator heap and each block handed out a region in it (the bytes
 * asked for, plus the red-zone pad when red zones are on, which the library
 * itself fills and scans), so memcheck reports such an access as an invalid
 * global read or write. By default it is on when a tool is attached (the
 * tool sets NVTX_INJECTION64_PATH; memcheck honours NVTX by default since
 * CUDA 12.0, --nvtx yes) and costs nothing without one: no NVTX call is
 * made, and the pool skips the hooks. METRALE_NVTX=1 turns it on even when
 * no tool is detected (NVTX then finds out itself, for a few ns per pooled
 * alloc and free without a tool), METRALE_NVTX=0 off. The host backend has
 * no tool to tell. scripts/nvtx-memcheck.sh shows it. */

/** As metrale_alloc_at, ordered on stream s (NULL: the default stream): the
 *  block may still be in use by work earlier on s's timeline only when that
 *  work freed it on s, so kernels on s may use it at once. With the pool
 *  off (pool = 0, METRALE_POOL=0) it is a driver allocation, as
 *  metrale_alloc_at. Statuses as metrale_alloc_at, and INVALID_ARGUMENT for
 *  a stream that is not a live stream of ctx. Allowed while s captures: the
 *  pool hands out memory at the call and records nothing into the graph
 *  (rule 3). */
metrale_status_t metrale_alloc_async_at(metrale_context_t* ctx, size_t bytes,
                                        metrale_stream_t* s, const char* file, int line,
                                        metrale_devptr_t* out);
#define metrale_alloc_async(ctx, bytes, s, out) \
  metrale_alloc_async_at((ctx), (bytes), (s), __FILE__, __LINE__, (out))

/** Frees dptr on stream s: every use of it before this point of s finishes
 *  before the memory is used again; uses on other streams must be ordered
 *  before it by the caller or marked with metrale_record_stream (rule 9).
 *  The ledger entry leaves at once. With the pool off it is metrale_free_at.
 *  file/line name the free in red-zone and quarantine reports (copied; NULL:
 *  "<unknown>"). Statuses as metrale_free_at, and INVALID_ARGUMENT for a bad
 *  stream (nothing freed). While s captures, see rule 9. */
metrale_status_t metrale_free_async_at(metrale_context_t* ctx, metrale_devptr_t dptr,
                                       metrale_stream_t* s, const char* file, int line);
/** metrale_free_async_at without a site (what binaries built against 0.2
 *  call). C and C++ code compiled with this header calls
 *  metrale_free_async_at through the macro below. */
metrale_status_t metrale_free_async(metrale_context_t* ctx, metrale_devptr_t dptr,
                                    metrale_stream_t* s);
#define metrale_free_async(ctx, dptr, s) \
  metrale_free_async_at((ctx), (dptr), (s), __FILE__, __LINE__)

/** Marks the live allocation dptr as used on stream s (like torch's
 *  record_stream): when it is freed, the pool records an event on s and
 *  reuses the block only once that event completed. NOT_FOUND when dptr is
 *  not a live ledger allocation, INVALID_ARGUMENT for dptr 0, an interior
 *  pointer or a bad stream. A later free is CAPTURE (nothing freed) while
 *  s captures: its event would be recorded into the graph. A free that a
 *  capture of its own stream defers (rule 9) is OK and the block then waits
 *  for the end of s's capture as well, even when the freeing stream is
 *  destroyed first. With the pool off: METRALE_OK, nothing to do (a driver
 *  free already waits). Thread-safe. */
metrale_status_t metrale_record_stream(metrale_context_t* ctx, metrale_devptr_t dptr,
                                       metrale_stream_t* s);

/** The pool's figures, one consistent snapshot. */
typedef struct metrale_pool_stats {
  size_t struct_size;          /* sizeof(metrale_pool_stats_t) */
  int enabled;                 /* 1 when metrale_alloc serves from the pool */
  uint64_t reserved_bytes;     /* held from the driver, in chunks */
  uint64_t in_use_bytes;       /* handed out, as rounded blocks (pads included;
                                  freed blocks waiting in the quarantine or
                                  for their pad check, pads_pending, count
                                  until they are back) */
  uint64_t requested_bytes;    /* handed out, as asked (pads included) */
  uint64_t cached_bytes;       /* reserved - in_use: free blocks kept for reuse */
  uint64_t peak_in_use_bytes;  /* since creation */
  uint64_t chunk_allocs;       /* driver allocations made for chunks */
  uint64_t chunk_frees;        /* chunks given back (trim, out-of-memory retry) */
  uint64_t largest_free_block; /* bytes */
  uint64_t blocks_in_use;      /* counted as in_use_bytes */
  uint64_t quarantined_bytes;  /* freed blocks held back (quarantine_bytes),
                                  pool on or off */
  /* Fields below were added with the red-zone check of freed blocks; a
   * struct_size of offsetof(metrale_pool_stats_t, pad_fills) (the older
   * layout) is accepted and gets the fields above. Red zones on pooled
   * blocks (see metrale_redzone_scan, "Freed pads"): */
  uint64_t pad_fills;          /* allocations whose pad the library filled
                                  (a stream-ordered memset, and for
                                  metrale_alloc a wait for it) */
  uint64_t pad_fills_skipped;  /* allocations whose pad lay in a tail
                                  already checked to hold the pattern: no
                                  fill, no wait, no device call */
  uint64_t pad_checks;         /* batch checks of freed padded blocks run
                                  (each: one device pass, queued on the
                                  freeing stream, or, synchronous, after
                                  one wait per stream involved) */
  uint64_t pads_checked;       /* freed padded blocks those checks read */
  uint64_t pads_overwritten;   /* of those, found overwritten (a queued
                                  check counts once its results are read),
                                  also when the overrun is not reported
                                  again (a scan reported it while the
                                  allocation was live or quarantined) */
  uint64_t pads_pending;       /* freed padded blocks waiting for a check now */
  uint64_t pads_pending_bytes; /* their block bytes (not reusable meanwhile;
                                  metrale_free_memory counts them) */
  /* Added after pads_pending_bytes; a struct_size of
   * offsetof(metrale_pool_stats_t, pads_unlisted) is accepted too. */
  uint64_t pads_unlisted;      /* of pads_overwritten, reports no
                                  metrale_redzone_scan will list: past the
                                  METRALE_REDZONE_FREED_REPORTS_MAX kept
                                  between scans (logged at error level only) */
} metrale_pool_stats_t;

/** Copies the pool's figures into *out (out->struct_size set by the caller:
 *  sizeof(metrale_pool_stats_t) or an older layout's size, see pad_fills
 *  and pads_unlisted).
 *  With the pool off: enabled 0, every figure 0 (the pad figures too)
 *  except quarantined_bytes: the quarantine holds driver allocations back
 *  then, and that is what it counts.
 *  INVALID_ARGUMENT for NULL or a struct_size this library does not know. Host-side: answers on a
 *  lost context. Thread-safe. */
metrale_status_t metrale_pool_stats(metrale_context_t* ctx, metrale_pool_stats_t* out);

/** Gives cached free chunks back to the driver, largest first, until at
 *  most keep_bytes stay cached; blocks in use are never touched. Waits for
 *  the frees made before the call to complete (their streams' work so far,
 *  and frees pending on other streams), without holding the pool: other
 *  threads allocate and free meanwhile, and a host kernel it waits for may
 *  too. A chunk freed on a stream that is capturing, whose last use is not
 *  known complete, stays cached (no event is recorded into the capture),
 *  and so does one freed by another thread during the call. Also frees every
 *  pinned host block metrale_host_alloc_pinned's cache holds (keep_bytes
 *  applies to device memory only). *released (may be NULL) gets the bytes
 *  given back, both kinds. With the pool off only the pinned cache is
 *  freed. Quarantined blocks stay quarantined. Freed padded blocks waiting
 *  for their red-zone check are checked first (see "Freed pads"). CONTEXT_LOST, DRIVER.
 *  OUT_OF_MEMORY (host memory for its bookkeeping, or a checked block that
 *  found none to go back to the pool: it waits for the next check, its
 *  chunk kept) after releasing part of what it would have (rule 1's
 *  exception); a trim with memory then finishes the job. Frees a capture's
 *  end could not release for want of memory are tried again here first.
 *  Thread-safe. */
metrale_status_t metrale_pool_trim(metrale_context_t* ctx, size_t keep_bytes, size_t* released);

/** Device memory that is never on the ledger and has no red zone: for
 *  arenas the caller manages. INVALID_ARGUMENT for bytes 0; OUT_OF_MEMORY. */
metrale_status_t metrale_alloc_arena(metrale_context_t* ctx, size_t bytes, metrale_devptr_t* out);
/** Frees what metrale_alloc_arena gave. 0 is OK; NOT_FOUND otherwise unknown. */
metrale_status_t metrale_free_arena(metrale_context_t* ctx, metrale_devptr_t dptr);

/** Page-locked host memory, mapped for the device. INVALID_ARGUMENT for
 *  bytes 0; OUT_OF_MEMORY when the driver refuses it (for a size the
 *  pinned pool caches, after the pool gave its cached blocks back and
 *  tried once more; a larger size leaves the pool as it was). The caller
 *  frees it with metrale_host_free_pinned; the contents are undefined (a
 *  reused block holds what it held before).
 *  With opts.pinned_pool on (the default; METRALE_PINNED_POOL=0 turns it
 *  off) a request is rounded up to its size class, and a block of that
 *  class freed earlier in this context is handed out again without a
 *  driver call; a miss allocates the whole class. Only the bytes asked are
 *  the caller's: past them metrale_host_is_pinned answers 0 and
 *  metrale_host_device_pointer NOT_FOUND, as without the pool.
 *  Thread-safe. */
metrale_status_t metrale_host_alloc_pinned(metrale_context_t* ctx, size_t bytes, void** out);
/** NULL is OK; NOT_FOUND for a pointer not from metrale_host_alloc_pinned
 *  of this context, or already freed. With the pinned pool on the block
 *  stays page-locked in the pool (up to 256 MiB cached; beyond, the oldest
 *  cached blocks go back to the driver; all of them at context destroy
 *  and at metrale_pool_trim), yet to this context it is gone exactly as a
 *  driver-freed block: metrale_host_is_pinned answers 0, a device pointer
 *  NOT_FOUND, a second free NOT_FOUND, checked pointers refuse its device
 *  address, and copies treat a stale pointer into it as pageable memory;
 *  other contexts answer the same (rule 7). Using a freed block is a use
 *  after free as ever: the pool may hand it out again. Thread-safe. */
metrale_status_t metrale_host_free_pinned(metrale_context_t* ctx, void* hptr);
/** Page-locks the caller's memory [hptr, hptr+bytes). INVALID_ARGUMENT for
 *  NULL, bytes 0, or a range overlapping one already pinned (a stale
 *  pointer into a block freed into the pinned pool included). */
metrale_status_t metrale_host_register(metrale_context_t* ctx, void* hptr, size_t bytes);
/** Undoes metrale_host_register; NOT_FOUND for a pointer not registered. */
metrale_status_t metrale_host_unregister(metrale_context_t* ctx, void* hptr);
/** *yes = 1 when every byte of [hptr, hptr+bytes) is pinned host memory,
 *  whoever pinned it (this context, another context, the CUDA runtime,
 *  PyTorch: see rule 7), else 0. INVALID_ARGUMENT for NULL ctx/yes or bytes
 *  0; CONTEXT_LOST when the driver itself answers with a sticky fault. */
metrale_status_t metrale_host_is_pinned(metrale_context_t* ctx, const void* hptr, size_t bytes,
                                        int* yes);
/** The device address of pinned or registered host memory (interior
 *  pointers too), including memory pinned outside this context (rule 7).
 *  NOT_FOUND when hptr is not pinned, or is pinned but not mapped for the
 *  device. */
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
 *  (0 = all; a min_mib too large for its bytes to fit in 64 bits selects
 *  none), then a total line. *needed gets the bytes the text needs, NUL
 *  included. buf may be NULL when buflen is 0 (a size query: METRALE_OK).
 *  BUFFER_TOO_SMALL when buflen < *needed (buf holds a truncated, NUL-ended
 *  text). */
metrale_status_t metrale_alloc_report(metrale_context_t* ctx, size_t top_n, size_t min_mib,
                                      char* buf, size_t buflen, size_t* needed);

/** Frees every live ledger allocation, logs a warning naming their sites,
 *  and writes how many there were to *count (count may be NULL).
 *  CONTEXT_LOST once the context is lost (destroy still sweeps). Thread-safe
 *  against allocs and frees on other threads: a block freed meanwhile by
 *  its owner is not counted here (the owner's free counts it), one allocated
 *  meanwhile may or may not be swept, and sizes and sites come from the
 *  entry taken off the ledger, so the counters stay exact (rule 4). A
 *  pooled block that an open capture still uses (its stream's, or a stream
 *  it was marked on with metrale_record_stream) leaves the ledger at once
 *  and goes back to the pool when that capture closes (rule 9). A red-zone
 *  report on a block the sweep freed (this call's or the destroy's) names
 *  "<metrale_sweep_unreleased>", line 0, as the site that freed it. The
 *  sweep's blocks skip the quarantine (only metrale_free and
 *  metrale_free_async quarantine): they go straight to the red-zone check
 *  and the pool. */
metrale_status_t metrale_sweep_unreleased(metrale_context_t* ctx, size_t* count);

/* ------------------------------------------------------------------ */
/* Allocation tags                                                     */
/* ------------------------------------------------------------------ */
/* A tag is a label (a model's module name, a phase of a program) that each
 * ledger entry carries besides its site: every device or managed
 * allocation made on a thread gets that thread's current tag, the
 * innermost one pushed and not yet popped, and keeps it until it is freed.
 * Tags are per thread and process-wide (not per context: the code that
 * sets one, a PyTorch forward hook, does not know which device's context
 * the allocation lands on). Each distinct text is copied once into a
 * process-wide table and kept for the life of the process: pointers to tag
 * text returned here stay valid until exit. Reading the current tag costs
 * an allocation one thread-local load. The quarantine's and the red-zone
 * scan's first violation name the tag in the scan's message; a live
 * violation's tag is metrale_allocation_tag(ctx, v.ptr). */

/** The longest tag text, in bytes (NUL excluded). */
#define METRALE_TAG_MAX_BYTES 256
/** How many tags one thread may have pushed and not popped. */
#define METRALE_TAG_MAX_DEPTH 256
/** How many distinct tags one process may use. */
#define METRALE_TAG_MAX_TAGS 65536

/** Pushes `tag` (copied) as the calling thread's current tag, until the
 *  matching metrale_tag_pop. INVALID_ARGUMENT, nothing pushed, for NULL,
 *  empty text, text longer than METRALE_TAG_MAX_BYTES or with control bytes
 *  (below 0x20, 0x7f), METRALE_TAG_MAX_DEPTH tags pushed on this thread
 *  already, or a new text when the process holds METRALE_TAG_MAX_TAGS
 *  distinct tags or 4 MiB of their text (rule 6: a loop of ever new names
 *  cannot grow the table without bound). Thread-safe; affects only the
 *  calling thread. */
metrale_status_t metrale_tag_push(const char* tag);
/** Pops the calling thread's innermost tag; the one below it (or none)
 *  becomes current. INVALID_ARGUMENT when the thread has none pushed. */
metrale_status_t metrale_tag_pop(void);
/** The calling thread's current tag, NULL when none (valid until exit). */
const char* metrale_tag_current(void);

/** As metrale_alloc_report, grouped by tag instead of site: lines read
 *  "<bytes> in <n> allocations tagged <tag>", untagged memory on a line
 *  "... untagged"; same top_n, min_mib, size query, BUFFER_TOO_SMALL. */
metrale_status_t metrale_alloc_report_by_tag(metrale_context_t* ctx, size_t top_n,
                                             size_t min_mib, char* buf, size_t buflen,
                                             size_t* needed);
/** *tag = the tag the live allocation dptr was made under (NULL: none; the
 *  text is valid until exit). NOT_FOUND when dptr is not a live ledger
 *  allocation of ctx (interior pointers included); INVALID_ARGUMENT for
 *  NULL ctx or tag. Thread-safe. */
metrale_status_t metrale_allocation_tag(metrale_context_t* ctx, metrale_devptr_t dptr,
                                        const char** tag);

/* ------------------------------------------------------------------ */
/* Red zones                                                           */
/* ------------------------------------------------------------------ */

/** How many reports of pads overwritten before their free ("Freed pads"
 *  below) the context keeps for the next metrale_redzone_scan. */
#define METRALE_REDZONE_FREED_REPORTS_MAX 4096

/** Checks every pad in one pass, after waiting for the work on the context's
 *  streams that are not capturing (work on streams this library did not
 *  create, e.g. the CUDA runtime's, must be finished by the caller; the
 *  device context as a whole is not synchronized, so a capture on another
 *  thread goes on). *count gets the number of overwritten pads;
 *  up to cap of them, oldest first, go to out (out may be NULL when cap is
 *  0). METRALE_OK when none is overwritten (and when red zones are off);
 *  METRALE_ERROR_REDZONE_CORRUPTED when any is (the message names the first);
 *  METRALE_ERROR_CAPTURE when pads are dirty but the default stream, which
 *  reads them back, is capturing (end or abort that capture first); a scan
 *  that fails reports nothing, and the next one reports what it would have
 *  (the pads of freed blocks found overwritten by their check included).
 *  A scan does not repair pads: see metrale_redzone_poison.
 *  Thread-safe against alloc and free on other threads (rule 4): a pad is
 *  reported only for an allocation live (same seq) through the whole scan;
 *  frees during the scan never make it fail, and their memory is returned
 *  when it ends. Several scans may run at once (one at a time uses the
 *  context's kept pad table; another takes a copy of its own, never waits).
 *  Cost: the pads changed since the previous scan, plus one device pass;
 *  the context keeps the table between scans (32 bytes per pad in host
 *  memory; on cuda 16 in device memory plus 8 for results).
 *  INVALID_ARGUMENT from a host kernel of ctx: the scan waits for every
 *  stream, the kernel's own included (rule 5).
 *  Overruns of freed blocks found by the checks of freed pads ("Freed
 *  pads") are kept for the next scan, METRALE_REDZONE_FREED_REPORTS_MAX of
 *  them at most (the oldest; a scan takes them all and empties the list).
 *  Past that bound a finding is only logged at error level and counted in
 *  pads_overwritten and pads_unlisted (metrale_pool_stats): no scan lists
 *  it, so a scan's count can be lower than the overruns found meanwhile. */
metrale_status_t metrale_redzone_scan(metrale_context_t* ctx, metrale_redzone_violation_t* out,
                                      size_t cap, size_t* count);

/* Freed pads (pool on, red zones on). A padded pooled block freed with
 * metrale_free / metrale_free_async is not reused at once: it waits, off the
 * ledger, until a batch check reads its pad (and the block's rounding
 * slack after it, up to 4 KiB, which the library fills with the pattern
 * too: a write there is no pad overrun and is not reported, but the block
 * then keeps only its pad as checked). A check runs when
 * METRALE_REDZONE_VERIFY_BATCH blocks (default 256) or
 * METRALE_REDZONE_VERIFY_BYTES block bytes (default 1 GiB) wait, and before
 * metrale_redzone_scan, metrale_pool_trim, the pool's out-of-memory retry
 * and metrale_context_destroy (0 for either knob: every free is checked at
 * once, but see below for a free that finds a check running; a malformed
 * value fails metrale_context_create with INVALID_ARGUMENT). Waiting blocks are memory the pool cannot reuse
 * until their check starts, so the byte bound is also how often large
 * blocks are checked: at the default, a loop of 64 MiB allocations starts
 * a check every 16 frees (each a device launch) and holds up to 1 GiB
 * back; a larger bound means fewer checks and more memory reserved.
 * A check runs in stream order: the blocks freed on
 * one stream (and marked on no other with record_stream) get one device
 * pass queued on that stream, behind the work already there, which reads
 * each pad and its filled slack, notes what it finds and writes the
 * pattern back; the blocks go back to the pool at once with their checked
 * range, so nothing is waited for (the pool's stream order keeps the pass
 * before any reuse). The pass's findings are read once it has finished: at
 * the next check, or, waiting for it, at metrale_redzone_scan and at
 * metrale_context_destroy; only then are they reported. Blocks marked on
 * other streams, and every block when METRALE_REDZONE_VERIFY_ORDERED=0 or
 * METRALE_REDZONE_VERIFY_BATCH is 0 or 1, get the synchronous check: it
 * first waits for the streams the blocks were freed and used on, once
 * each, then reads every tail in one device pass and reports before the
 * call that started it returns. Blocks whose stream captures wait for a
 * later check. One check runs at a time and a free never waits for
 * another's: a free that meets a bound while another thread's check runs,
 * or that is made from a host kernel or from a log callback (which may be
 * what that check waits for), returns with its block unchecked and not yet
 * reported. The check running takes it before it ends (its own call
 * returns after that); when none runs (a free from a host kernel with no
 * check running), the next check does: the next free that meets a bound,
 * metrale_redzone_scan, metrale_pool_trim and the others named above. So
 * with METRALE_REDZONE_VERIFY_BATCH=1, once every thread's calls have
 * returned, only blocks freed from a host kernel with no check running
 * and blocks whose stream captures still wait (pads_pending). So an overrun by an allocation freed before any scan is
 * caught (a scan of live pads alone never saw it): the check logs it at
 * error level with
 * the site that allocated and the site that freed the block and its tag,
 * writes it to the event log as a "redzone" scan, counts it
 * (pads_overwritten), and the next metrale_redzone_scan lists it among its
 * violations (seq and allocation site of the freed block, expected =
 * METRALE_REDZONE_PATTERN) and fails with REDZONE_CORRUPTED naming both
 * sites (also while the default stream captures: these pads were read
 * back by the check). A pad a scan already reported while its allocation
 * was live is not reported again at its free (until metrale_redzone_poison
 * repairs it). A block is handed out again only after its check (in
 * stream order: after the queued pass); an intact one, and one the
 * stream-ordered pass wrote the pattern back over, keeps a record of its
 * checked range, and an allocation whose pad
 * falls inside it needs no fill and no wait (pad_fills_skipped): alloc+free
 * with red zones makes no device call per pair, one check per batch. So a
 * write into free pool memory (a use after free) that lands in such a
 * range is reported as an overrun of the allocation that reuses the block
 * (before, its fill hid it): the quarantine (below) names such writes.
 * Blocks allocated while their stream captures keep their old path (the
 * pad filled at once). With the quarantine on, freed blocks go to the
 * quarantine first, and from it to this check (see metrale_quarantine_scan).
 *
 * METRALE_REDZONE_REUSE=n (n > 1; read at metrale_context_create; no effect
 * with the quarantine on) trades exact naming for speed: a padded block
 * freed on its own stream (metrale_free, or metrale_free_async on the
 * stream it was allocated on), never marked with record_stream, whose pad
 * a scan has not reported, is cached at once with its pad unchecked, and
 * only an allocation of the same size on that stream takes it again (its
 * pad lies on the same bytes, so no fill and nothing lost). Up to n such
 * owners share one check: the n-th owner's free is queued for the batch
 * check above, and so is an unchecked block whenever the pool would give
 * it to another size or stream, coalesce it or release it, at
 * metrale_redzone_scan, metrale_pool_trim, the out-of-memory retry, the
 * destroy of its stream and metrale_context_destroy. An overrun that check
 * finds is reported as above for the last owner, and the report (log line,
 * scan message) also names every earlier owner since the pad's last check,
 * "seq S from file:line freed at file:line": one of them wrote it. A scan
 * that finds the pad of a live allocation overwritten says the same of
 * its earlier owners. The first such report turns the reuse off for the
 * context (a warning says so), so the next overrun is named exactly. (The
 * earlier owners of the checks queued last are kept, 65536 owners in all;
 * past that a report gives only how many there were.) Cost with the
 * default batch: one check per n frees of a loop instead of one per free
 * (bench/: alloc_free/<size>/library_pool_redzone_reuse8). */

/** The byte freed memory in quarantine is filled with. */
#define METRALE_QUARANTINE_PATTERN 0xD7u

/** A write into freed memory held in quarantine (a use after free). */
typedef struct metrale_use_after_free {
  metrale_devptr_t ptr;      /* the freed allocation's pointer */
  size_t bytes;              /* its size as asked */
  uint64_t seq;
  const char* alloc_file;    /* where it was allocated (valid until context destroy) */
  int alloc_line;
  const char* free_file;     /* where it was freed ("<unknown>" when the free gave none) */
  int free_line;
  size_t first_bad_offset;   /* from ptr, within its `bytes` (the pad is the
                                red-zone scan's); METRALE_REDZONE_OFFSET_UNKNOWN
                                when the bytes changed back before they
                                could be read (found is 0 then) */
  size_t bad_bytes;          /* bytes that differ from METRALE_QUARANTINE_PATTERN */
  uint8_t found;             /* what the first bad byte holds */
} metrale_use_after_free_t;

/** The freed-memory quarantine (red zones on and quarantine_bytes > 0, or
 *  METRALE_QUARANTINE=<bytes>): each device allocation freed with
 *  metrale_free / metrale_free_async is filled with
 *  METRALE_QUARANTINE_PATTERN on the stream it is freed on (over its bytes;
 *  its pad keeps what its owner left there) and held back, not reused,
 *  while the quarantine holds at most quarantine_bytes. A pooled block
 *  that other streams may still use (marked with metrale_record_stream, or
 *  freed with metrale_free_async on a stream other than its own: rule 9)
 *  is filled only once the work queued on those streams before the free
 *  has completed, which the free does not wait for: an event is recorded
 *  on each, and later frees and scans fill the blocks whose events have
 *  completed (never into a capture). With the pool off, where a driver
 *  free would wait for the whole device, every freed block waits so for
 *  the work queued before its free on each stream of ctx (its free still
 *  does not wait). Until then its buffer is not checked;
 *  if it leaves the quarantine unfilled, the pool waits for those streams
 *  as for any such free. A stream that captures at the free is never
 *  waited for, so that block is never filled. Past quarantine_bytes the
 *  oldest go back: a padded pooled block through the check of freed pads
 *  (see "Freed pads": an overrun before its free is reported then, with
 *  the free's site), others to the pool or the driver unchecked. A block
 *  whose size alone exceeds the budget, and one freed while its stream
 *  captures, is not quarantined; nor is one the quarantine has no memory
 *  to take (host memory for its record, or an event to wait with, ran
 *  out before its fill was queued): that free completes as without the
 *  quarantine, unfilled, and logs a warning.
 *  This scan waits for the context's streams as metrale_redzone_scan does,
 *  then checks every quarantined block: *count gets how many were written
 *  after their free; up to cap go to out, oldest free first. METRALE_OK when
 *  none (and when the quarantine is off); METRALE_ERROR_REDZONE_CORRUPTED
 *  when any (the message names the first, with the site that allocated it
 *  and the site that freed it); CAPTURE when a dirty block must be read back
 *  while the default stream captures. Reported blocks stay quarantined.
 *  metrale_redzone_scan runs this check too and lists these blocks among
 *  its violations (expected = METRALE_QUARANTINE_PATTERN, file/line = the
 *  allocation site, first_bad_offset from ptr), and with them, once each,
 *  the quarantined blocks whose pad was overwritten (expected =
 *  METRALE_REDZONE_PATTERN, first_bad_offset past the end; not reported
 *  again when the block leaves the quarantine). Thread-safe, as
 *  metrale_redzone_scan (rule 4). */
metrale_status_t metrale_quarantine_scan(metrale_context_t* ctx, metrale_use_after_free_t* out,
                                         size_t cap, size_t* count);

/** Refills with the pattern the pads of live allocations whose seq lies in
 *  [lo, hi), so that a later overrun there is reported as new. Freed pads
 *  are never refilled: an overrun a scan reported before its free stays
 *  reported once. With METRALE_REDZONE_REUSE, a pad that may still hold an
 *  overrun by earlier owners of its block that no scan has reported is left
 *  as it is: the next scan or its free's check reports it, naming them.
 *  INVALID_ARGUMENT when lo > hi. OK when red zones are off.
 *  Thread-safe against free as the scan is (rule 4): a pad freed during the
 *  call may still be filled, but its memory is not handed out again until
 *  the call ends, so no other allocation's bytes are ever written. */
metrale_status_t metrale_redzone_poison(metrale_context_t* ctx, uint64_t lo, uint64_t hi);

/* ------------------------------------------------------------------ */
/* Copies and memsets                                                  */
/* ------------------------------------------------------------------ */
/* A copy of 0 bytes is a no-op that returns METRALE_OK. With checked
 * pointers on, a device range outside every live allocation (ledger or
 * arena) is METRALE_ERROR_OUT_OF_BOUNDS before a byte moves. The host
 * backend always refuses device ranges outside its own memory with
 * METRALE_ERROR_INVALID_ARGUMENT. Synchronous copies run on the default
 * stream and wait for it; from a host kernel running on the stream they
 * would wait for, they return INVALID_ARGUMENT and copy nothing (rule 5).
 *
 * Pinned staging. metrale_copy_h2d, copy_h2d_async, copy_d2h,
 * copy_d2h_on_stream and copy_d2h_async whose host side is pageable (not
 * pinned by anyone, rule 7) and at least staging_threshold bytes (context
 * option, METRALE_STAGING_THRESHOLD; 0 = off) go through the context's ring
 * of staging_buffers pinned buffers of staging_buffer_bytes: the copy is cut
 * into pieces of one buffer; the host memcpy of each piece is split over
 * staging_threads threads and overlaps the DMA of the pieces before it, on
 * the copy's stream. What each call promises does not change: a
 * synchronous copy has finished on return; copy_h2d_async has read all of
 * src on return (its last DMAs may still run; the caller may reuse src);
 * a staged copy_d2h_async has written dst on return (as the driver's own
 * pageable D2H does). Counters move as for a direct copy (one copy, its
 * bytes). Never staged, always one direct copy: pinned host memory,
 * copy_h2d_async_retained, any copy while its stream captures (the capture
 * rules of rule 3 apply unchanged), a copy made from inside a host kernel,
 * a device range the backend cannot vouch for as one allocation (the
 * direct copy then reports the error), a host range that shares bytes
 * with the device range (host-backend or managed memory: the direct copy
 * moves overlapping bytes as memmove does), and a copy made while another
 * staged copy holds the context's ring (one staged copy per context at a
 * time; the others, a log callback's own copy included, copy directly
 * rather than wait). If the
 * ring cannot be page-locked, staging stays off for the context (logged at
 * debug). */

/** Host to device, synchronous (default stream). CAPTURE, with nothing
 *  recorded, while the default stream captures (rule 3). */
metrale_status_t metrale_copy_h2d(metrale_context_t* ctx, const void* src, size_t bytes,
                                  metrale_devptr_t dst);
/** Device to host, synchronous (default stream). CAPTURE, with nothing
 *  recorded, while the default stream captures (rule 3). */
metrale_status_t metrale_copy_d2h(metrale_context_t* ctx, metrale_devptr_t src, void* dst,
                                  size_t bytes);
/** Device to host on `stream`, waiting for that stream before returning.
 *  CAPTURE, with nothing recorded, while `stream` captures (rule 3). */
metrale_status_t metrale_copy_d2h_on_stream(metrale_context_t* ctx, metrale_devptr_t src,
                                            void* dst, size_t bytes, metrale_stream_t* stream);
/** Device to host on `stream` without waiting: dst is written when the
 *  stream reaches the copy; synchronize the stream before reading it. In a
 *  capture the graph writes dst at every replay: keep dst valid until the
 *  graph is destroyed (rule 3). */
metrale_status_t metrale_copy_d2h_async(metrale_context_t* ctx, metrale_devptr_t src, void* dst,
                                        size_t bytes, metrale_stream_t* stream);
/** Device to device, synchronous (default stream). Traced. CAPTURE, with
 *  nothing recorded, while the default stream captures (rule 3). */
metrale_status_t metrale_copy_d2d(metrale_context_t* ctx, metrale_devptr_t src,
                                  metrale_devptr_t dst, size_t bytes);
/** Host to device on `stream`. The caller may reuse src on return: when src
 *  is pinned (the copy would read it later), by this context or by anyone
 *  else in the process as the driver says (rule 7), the call waits for the
 *  stream and logs a warning once per context. While `stream` captures it
 *  does not wait: src is copied at the call into host memory the graph owns
 *  and frees with itself, and every replay writes those bytes (rule 3). On
 *  cuda, CAPTURE (nothing recorded) where the driver lacks user objects. */
metrale_status_t metrale_copy_h2d_async(metrale_context_t* ctx, const void* src, size_t bytes,
                                        metrale_devptr_t dst, metrale_stream_t* stream);
/** Host to device on `stream`, never waiting: the caller keeps src alive and
 *  unchanged until its next synchronization of the stream. In a capture the
 *  graph reads src at every replay: keep it valid until the graph is
 *  destroyed; a replay copies what src holds then (rule 3). */
metrale_status_t metrale_copy_h2d_async_retained(metrale_context_t* ctx, const void* src,
                                                 size_t bytes, metrale_devptr_t dst,
                                                 metrale_stream_t* stream);
/** Device to device on `stream`. Traced once the backend took the copy (a
 *  failed call leaves no trace entry). On failure a backtrace is logged. */
metrale_status_t metrale_copy_d2d_async(metrale_context_t* ctx, metrale_devptr_t src,
                                        metrale_devptr_t dst, size_t bytes,
                                        metrale_stream_t* stream);
/** Pitched 2D device to device copy of height rows of width_bytes on
 *  `stream`. INVALID_ARGUMENT when a pitch is smaller than width_bytes. */
metrale_status_t metrale_copy_d2d_2d_async(metrale_context_t* ctx, metrale_devptr_t src,
                                           size_t src_pitch, metrale_devptr_t dst,
                                           size_t dst_pitch, size_t width_bytes, size_t height,
                                           metrale_stream_t* stream);
/** Sets bytes to value, synchronous (default stream). CAPTURE, with nothing
 *  recorded, while the default stream captures (rule 3). */
metrale_status_t metrale_memset(metrale_context_t* ctx, metrale_devptr_t dptr, uint8_t value,
                                size_t bytes);
/** Sets bytes to value on `stream`. Traced once the backend took it. */
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
/** The largest module file metrale_module_load_file reads (1 GiB). */
#define METRALE_MODULE_FILE_MAX_BYTES 1073741824ul
/** As metrale_module_load_data, reading the image from `path`. NOT_FOUND when
 *  the file cannot be opened or read; INVALID_ARGUMENT when it is not a
 *  regular file (directory, FIFO, socket, device such as /dev/zero), is
 *  empty, or is larger than METRALE_MODULE_FILE_MAX_BYTES. Returns promptly:
 *  a FIFO is never waited on and nothing is read before these checks. */
metrale_status_t metrale_module_load_file(metrale_context_t* ctx, const char* name,
                                          const char* path);
/** Unloads a module; its kernel handles stay known to the context, but
 *  launching them is NOT_FOUND for good, even after a module of the same
 *  name is loaded again (look the kernel up again). NOT_FOUND when no
 *  module has that name. The backend's module (on cuda its code and
 *  globals in device memory) stays loaded until 8 more modules of the
 *  context were unloaded after it, or the context is destroyed: a launch
 *  racing this call on another thread (rule 2) runs the kernel or is
 *  NOT_FOUND, and never hands the driver an unloaded function. A failure
 *  of that later backend unload is logged, not returned. */
metrale_status_t metrale_module_unload(metrale_context_t* ctx, const char* name);
/** 1 when a module (loaded or host-registered) has that name, else 0 (also
 *  for bad arguments, which set the message). */
int metrale_has_module(metrale_context_t* ctx, const char* name);

/** Looks up module::func, caching it, and records the lookup (found or not)
 *  with the caller's site in the kernel audit. *kernel is owned by the
 *  context. NOT_FOUND for an unknown module or function. A lookup that
 *  fails with OUT_OF_MEMORY (no host memory to make it) is neither counted
 *  (kernel_lookups, kernel_lookup_misses) nor recorded in the audit (rule 1). */
metrale_status_t metrale_kernel_get_at(metrale_context_t* ctx, const char* module,
                                       const char* func, const char* file, int line,
                                       metrale_kernel_t** kernel);
#define metrale_kernel_get(ctx, module, func, kernel) \
  metrale_kernel_get_at((ctx), (module), (func), __FILE__, __LINE__, (kernel))
/** *native gets the driver's function behind `kernel`, for what the
 *  library does not wrap (cuFuncSetAttribute for more dynamic shared memory,
 *  cuLaunchKernelEx with clusters): on cuda a CUfunction of ctx's device's
 *  primary context, valid until the kernel's module is unloaded (the
 *  backend's unload is deferred as metrale_module_unload says; do not count
 *  on it) or the context is destroyed. A launch made with it is the
 *  caller's own: no counters, no trace, no timing, no argument checks.
 *  Attributes set on it apply to the library's launches of `kernel` too.
 *  Do not unload its module through the driver. UNSUPPORTED on the host
 *  backend (its kernels are C functions); INVALID_ARGUMENT for a bad kernel
 *  or NULL native, NOT_FOUND for a kernel of an unloaded module;
 *  CONTEXT_LOST once lost. Thread-safe. */
metrale_status_t metrale_kernel_native(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                       void** native);

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
 *  the launch. It runs as work of its stream, in the thread that launched
 *  it (or launched the graph replaying it), and may call this library:
 *  calls that would wait for its own stream, destroy that stream or destroy
 *  its context return INVALID_ARGUMENT and do nothing; a wait that would
 *  deadlock with another host kernel returns INVALID_ARGUMENT; the rest
 *  works (rule 5). */
typedef metrale_status_t (*metrale_host_kernel_fn)(const metrale_host_kernel_call_t* call,
                                                   void* user);

/** Registers fn as module::func on the host backend (the module is created
 *  when new). Parameter sizes are unknown: params are passed through, and a
 *  launch captured in a graph keeps the caller's pointers. What fn may call
 *  back: see metrale_host_kernel_fn and rule 5.
 *  INVALID_ARGUMENT (NULL, name taken), UNSUPPORTED on the cuda backend. */
metrale_status_t metrale_module_register_host(metrale_context_t* ctx, const char* module,
                                              const char* func, metrale_host_kernel_fn fn,
                                              void* user);
/** As metrale_module_register_host, with the kernel's parameter sizes: the
 *  values are copied at launch (as on a GPU), packed buffers are checked
 *  against them and unpacked (each parameter aligned to the largest power of
 *  two dividing its size, at most 8), and the launch trace shows them.
 *  That alignment is right for scalars and pointers; an array or a struct
 *  may be less aligned (uint16_t[2]: 2, not 4): give its alignment with
 *  metrale_module_register_host_layout (the packing rule, below). */
metrale_status_t metrale_module_register_host_params(metrale_context_t* ctx, const char* module,
                                                     const char* func, metrale_host_kernel_fn fn,
                                                     void* user, const size_t* param_sizes,
                                                     size_t nparams);

/** Launches kernel with params (an array of pointers to each argument; may
 *  be NULL for a kernel without parameters) on `stream`. INVALID_ARGUMENT
 *  for a zero dimension or a configuration the driver refuses as invalid
 *  (a block of 2048 threads: the context stays healthy, nothing waits);
 *  CONTEXT_LOST when the launch revealed a sticky fault (latched); DRIVER
 *  otherwise (rule 7: only an unclassified code is probed, without a sync).
 *  With debug_sync, waits for the stream and names the kernel on failure;
 *  while the stream captures there is no wait (nor kernel timing) and the
 *  launch is only recorded. From a host kernel running on that stream,
 *  debug_sync makes it INVALID_ARGUMENT with nothing launched (rule 5). The
 *  trace entry and the launch counter move only when the launch was taken
 *  (rule 1). */
metrale_status_t metrale_launch(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                metrale_dim3_t grid, metrale_dim3_t block, uint32_t shared_bytes,
                                metrale_stream_t* stream, void** params);
/** The largest packed argument buffer for a kernel whose parameter layout
 *  is unknown (the driver's classic 4 KiB limit on kernel parameters). */
#define METRALE_PACKED_ARGS_MAX_BYTES 4096
/** As metrale_launch with every argument packed in one buffer, laid out as
 *  the kernel's parameters are (the packing rule below; to have each
 *  parameter's offset checked, use metrale_launch_packed_layout). Where the kernel's parameter layout is known
 *  (the driver's cuFuncGetParamInfo, or sizes given at host registration),
 *  args_bytes must equal it: else INVALID_ARGUMENT, nothing launched. Where
 *  it is unknown, args_bytes above METRALE_PACKED_ARGS_MAX_BYTES is
 *  INVALID_ARGUMENT, nothing launched. */
metrale_status_t metrale_launch_packed(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                       metrale_dim3_t grid, metrale_dim3_t block,
                                       uint32_t shared_bytes, metrale_stream_t* stream,
                                       const void* args, size_t args_bytes);

/* ------------------------------------------------------------------ */
/* Kernel parameter layout: the packing rule                            */
/* ------------------------------------------------------------------ */
/* One rule lays out a packed argument buffer, on both backends and in the
 * Rust and Go bindings (which point here): the parameters in order, each at
 * the first offset at or past the end of the one before that is a multiple
 * of its natural C alignment (alignof; Rust align_of, Go reflect's Align),
 * and nothing after the last. An array aligns like its element, a struct
 * like its most aligned member. It is the layout a C compiler gives a struct
 * with one member per parameter (less its tail padding), and the one nvcc
 * gives a kernel's parameters: the driver reports it (cuFuncGetParamInfo).
 *   (uint8_t, uint16_t[2], uint64_t)               offsets 0, 2, 8; 16 bytes
 *   (char, double, short, void*, long long, float) 0, 8, 16, 24, 32, 40; 44 bytes
 *   (uint8_t, struct { uint16_t a; uint8_t b[2]; float c; }, void*)
 *                                                  0, 4, 16; 24 bytes
 * (CUDA takes an array parameter inside a struct; the layout is the same.)
 * A parameter's size is 1..4096 bytes and its alignment a power of two
 * dividing the size, as sizeof and alignof always are. */

/** Lays out nparams parameters by the packing rule: offsets[i] gets the
 *  offset of parameter i (sizes[i] bytes, aligned to aligns[i]), and
 *  *args_bytes (may be NULL) the end of the last one, the args_bytes of a
 *  packed launch (0 for no parameters; the arrays may then be NULL).
 *  INVALID_ARGUMENT, nothing written, for a NULL array, a size outside
 *  1..4096 or an alignment that is not a power of two dividing its size;
 *  the message names the parameter. No context; thread-safe. */
metrale_status_t metrale_param_layout(const size_t* sizes, const size_t* aligns, size_t nparams,
                                      size_t* offsets, size_t* args_bytes);

/** As metrale_module_register_host_params with each parameter's alignment
 *  (alignof its type): the parameters are laid out by the packing rule, as
 *  nvcc lays out the same kernel, so a buffer packed for the GPU kernel is
 *  unpacked right for the host one. nparams 0: both arrays may be NULL;
 *  they are read during the call only.
 *  INVALID_ARGUMENT as metrale_module_register_host_params, and for sizes
 *  and alignments metrale_param_layout refuses (the message names the
 *  kernel and the parameter); UNSUPPORTED on the cuda backend. */
metrale_status_t metrale_module_register_host_layout(metrale_context_t* ctx, const char* module,
                                                     const char* func, metrale_host_kernel_fn fn,
                                                     void* user, const size_t* param_sizes,
                                                     const size_t* param_aligns, size_t nparams);

/** The kernel's parameter layout as the library knows it: offsets[i] and
 *  sizes[i] for the first cap parameters, *count the number it takes. Size
 *  query and BUFFER_TOO_SMALL as metrale_live_allocations (offsets and sizes
 *  may be NULL when cap is 0). UNSUPPORTED when the layout is unknown: a host
 *  kernel registered with metrale_module_register_host (no sizes), or a CUDA
 *  driver older than 12.4 (no cuFuncGetParamInfo). INVALID_ARGUMENT for a
 *  bad kernel, NOT_FOUND for one of an unloaded module. Host-side: answers
 *  on a lost context. Thread-safe. */
metrale_status_t metrale_kernel_param_layout(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                             size_t* offsets, size_t* sizes, size_t cap,
                                             size_t* count);

/** As metrale_launch_packed, saying where the caller put each parameter:
 *  offsets[i] and sizes[i] for nparams parameters (the arrays may be NULL
 *  when nparams is 0). The layout must hold together: sizes 1..4096, each
 *  parameter at or past the end of the one before, the last ending at
 *  args_bytes. Where the kernel's layout is known (metrale_kernel_param_layout),
 *  the caller's must equal it: a different count, or a parameter at another
 *  offset or of another size, is INVALID_ARGUMENT, the message naming the
 *  parameter's index, the kernel's offset and size and the caller's. Where
 *  it is unknown, the caller's layout stands and the buffer goes as it is.
 *  Refused: nothing launched, nothing counted or traced. The arrays are
 *  read during the call only. Other statuses, thread safety and the rest as
 *  metrale_launch_packed. The Rust and Go bindings launch through this call. */
metrale_status_t metrale_launch_packed_layout(metrale_context_t* ctx, metrale_kernel_t* kernel,
                                              metrale_dim3_t grid, metrale_dim3_t block,
                                              uint32_t shared_bytes, metrale_stream_t* stream,
                                              const void* args, size_t args_bytes,
                                              const size_t* offsets, const size_t* sizes,
                                              size_t nparams);

/* ------------------------------------------------------------------ */
/* Streams and events                                                  */
/* ------------------------------------------------------------------ */

/** A new non-blocking stream, owned by the caller until stream_destroy. */
metrale_status_t metrale_stream_create(metrale_context_t* ctx, metrale_stream_t** out);
/** Destroys a stream (NULL is OK). INVALID_ARGUMENT for the default stream,
 *  for a stream destroyed already (a second destroy touches nothing else)
 *  and for one of another context. Of two threads destroying the same
 *  stream, one succeeds. INVALID_ARGUMENT from a host kernel running on that
 *  stream (rule 5). A capture still open on it is aborted (its graph never
 *  exists) and the frees it deferred go back to the pool, after the work
 *  the stream ran before the capture; a stream from metrale_stream_wrap
 *  leaves the native stream's capture to its owner. */
metrale_status_t metrale_stream_destroy(metrale_context_t* ctx, metrale_stream_t* stream);
/** Waits for all work on the stream. CAPTURE while it is capturing (refused
 *  before the driver sees it, so the capture stays valid). Waiting for
 *  another stream while this thread captures is allowed. INVALID_ARGUMENT
 *  from a host kernel running on that stream (it would wait for itself), or
 *  when waiting would deadlock with a host kernel on another thread that
 *  waits for this kernel's stream (rule 5). */
metrale_status_t metrale_stream_synchronize(metrale_context_t* ctx, metrale_stream_t* stream);
/** The context's own non-blocking stream; NULL when ctx is NULL or not a
 *  live context. Owned by the context. */
metrale_stream_t* metrale_default_stream(metrale_context_t* ctx);
/** 1 when the stream is capturing, else 0. A failed query (bad ctx, driver
 *  error) counts as capturing and returns 1. */
int metrale_stream_is_capturing(metrale_context_t* ctx, metrale_stream_t* stream);
/** A stream handle for a stream this library did not create: `native` is a
 *  CUstream / cudaStream_t of the device's primary context (PyTorch's
 *  torch.cuda.current_stream().cuda_stream, CuPy's stream.ptr), so that
 *  metrale_alloc_async / metrale_free_async, copies and launches can be
 *  ordered on the stream a framework works on.
 *  - cuda: native NULL is the legacy default stream (the NULL stream of the
 *    CUDA runtime; CU_STREAM_LEGACY, which names the same stream, gives the
 *    same handle), CU_STREAM_PER_THREAD is taken as is, and any other value
 *    must be a live stream of this device's primary context
 *    (cuStreamGetCtx, where the driver has it, is asked: INVALID_ARGUMENT
 *    for a stream it refuses or one of another context; a value that is no
 *    stream at all is the driver's undefined behaviour, as in the CUDA
 *    runtime). The native stream stays its owner's: the library never
 *    destroys it, and the owner keeps it alive until the handle is
 *    destroyed.
 *  - host: there are no native streams. NULL gets a stream of its own (as
 *    metrale_stream_create would), standing for "the NULL stream" of code
 *    written for CUDA; any other value is UNSUPPORTED.
 *  Wrapping a native stream that is wrapped already returns the same handle
 *  and counts one more metrale_stream_destroy before the handle dies
 *  (rule 2), so independent users never retire it under each other; the
 *  last destroy retires it as metrale_stream_destroy does (the pool's
 *  blocks ordered on it pass to the default stream) without destroying the
 *  native stream. Capturing on a wrapped stream works as on any stream.
 *  Statuses: INVALID_ARGUMENT (NULL ctx/out, a refused native stream),
 *  UNSUPPORTED (host, non-NULL), CONTEXT_LOST. Thread-safe. */
metrale_status_t metrale_stream_wrap(metrale_context_t* ctx, void* native,
                                     metrale_stream_t** out);

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
/** Makes `stream` wait for the work recorded in `event`. Host backend: work
 *  runs when it is called, so the calling thread waits, until a record left
 *  behind a host kernel running on another stream is reached (none in a
 *  capture or on the record's own stream). Statuses: INVALID_ARGUMENT (bad
 *  handles; host: called from the kernel that record waits behind),
 *  UNSUPPORTED (host: the event's latest record is in a capture and
 *  `stream` is not capturing; cuda joins `stream` to that capture, the
 *  host backend's captures record one stream), CONTEXT_LOST. Thread-safe. */
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
 *  CAPTURE when the stream was not capturing or the capture was invalidated.
 *  OUT_OF_MEMORY for the library's own host memory comes before the capture
 *  ends: the stream is still capturing, with what it recorded (rule 1); the
 *  driver's own failures (cuStreamEndCapture, cuGraphInstantiateWithFlags,
 *  DRIVER or OUT_OF_MEMORY) come after it ended, the capture dropped. Frees
 *  that waited for this capture (rule 9) go back to the pool here; one that
 *  finds no host memory for it is kept and tried again at the next capture
 *  end or metrale_pool_trim (a warning says so). Not thread-safe per stream. */
metrale_status_t metrale_graph_end_capture(metrale_context_t* ctx, metrale_stream_t* stream,
                                           metrale_graph_t** graph);
/** Ends an active capture and drops what it recorded; OK when none is
 *  active. */
metrale_status_t metrale_graph_abort_capture(metrale_context_t* ctx, metrale_stream_t* stream);
/** Replays the graph on `stream`. CAPTURE, with nothing recorded and the
 *  capture intact, while `stream` is capturing (a driver capture cannot
 *  take a graph launch; rule 3). */
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
/** What this context can still get: the device's free memory plus the
 *  bytes the pool holds cached for reuse (metrale_pool_stats cached_bytes). */
metrale_status_t metrale_free_memory(metrale_context_t* ctx, size_t* bytes);
/** The device's own answer (cuMemGetInfo; the host's available memory). */
metrale_status_t metrale_device_free_memory(metrale_context_t* ctx, size_t* bytes);

/* ------------------------------------------------------------------ */
/* Telemetry                                                           */
/* ------------------------------------------------------------------ */

/** Copies the counters. c->struct_size is sizeof(metrale_counters_t), or the
 *  size of an older layout (offsetof(metrale_counters_t, timings_dropped)):
 *  then only the fields that layout has are written. INVALID_ARGUMENT when
 *  c is NULL or c->struct_size is neither. */
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
/** Turns per-kernel timing on or off (the kernel_timing option's default). */
metrale_status_t metrale_kernel_timing_enable(metrale_context_t* ctx, int on);
/** Per-kernel launches and total time, in first-launch order. Waits for the
 *  timed launches made before the call to finish (launches made meanwhile
 *  by other threads may or may not be in). `launches` counts the launches
 *  whose time is in total_ms, never 0: a kernel is listed once one of its
 *  timed launches has been resolved (one whose launches all failed, or all
 *  lost their timing, is not listed, though it holds one of the rows).
 *  Memory is bounded, however long timing stays on without a read:
 *  - at most 4096 timed launches wait to be resolved. When a launch finds
 *    4096 waiting, it first resolves those already finished (without
 *    waiting); if none has, the launch still runs at once, untimed, and
 *    counters.timings_dropped grows by one. A launch never blocks on timing.
 *  - at most 1024 kernels get a row; launches of further kernels are not
 *    timed and count in timings_dropped.
 *  - events are reused; at most 8192 idle ones are kept.
 *  Thread-safe: one caller waits at a time, and no lock a launch needs is
 *  held while waiting. CONTEXT_LOST once the context is lost while
 *  launches still wait for their timing (their events cannot be read);
 *  with none waiting, the rows kept answer as other host-side queries do;
 *  BUFFER_TOO_SMALL as metrale_live_allocations. */
metrale_status_t metrale_kernel_timings_read(metrale_context_t* ctx, metrale_kernel_timing_t* out,
                                             size_t cap, size_t* count);

/* ------------------------------------------------------------------ */
/* Several devices                                                     */
/* ------------------------------------------------------------------ */
/* One context runs on one device (opts.device or METRALE_DEVICE); a process
 * may hold contexts on several devices at once, and several contexts on one
 * device (on cuda they share the device's primary context). The host
 * backend simulates METRALE_HOST_DEVICES devices (default 1) that share the
 * host's memory, so multi-device code runs and is tested without a GPU.
 * Each context keeps its own ledger; the calls below add the view across
 * contexts and devices. Nothing here uses NVLink multicast. */

/** How many devices the backend offers: cuda: the driver's count; host:
 *  METRALE_HOST_DEVICES (default 1); AUTO: cuda's count when the driver
 *  answers with at least one device, else host's. METRALE_BACKEND
 *  overrides `backend` as it overrides opts.backend at create, so the
 *  answer is the range of ordinals metrale_context_create accepts.
 *  Statuses: INVALID_ARGUMENT (NULL count, a value outside
 *  metrale_backend_t, malformed METRALE_BACKEND or METRALE_HOST_DEVICES);
 *  for cuda NO_DRIVER when the driver is missing or a stub (NO_DEVICE when
 *  it has no device). A context on an ordinal >= the count is NO_DEVICE at
 *  create. Thread-safe; no context needed. */
metrale_status_t metrale_device_count(metrale_backend_t backend, int* count);

/** *can = 1 when ctx's device can read and write peer's device memory
 *  directly (cuDeviceCanAccessPeer; the same device, or the same context:
 *  1), else 0; metrale_peer_access_enable then says why. Contexts of two
 *  backends: 0. INVALID_ARGUMENT for a dead ctx or peer or NULL can;
 *  CONTEXT_LOST when either is lost. Thread-safe. */
metrale_status_t metrale_peer_access_query(metrale_context_t* ctx, metrale_context_t* peer,
                                           int* can);
/** Lets ctx's device reach peer's memory directly, one direction (call it
 *  both ways for both): kernels launched in ctx may then dereference
 *  peer's allocations, and peer copies go device to device without a
 *  bounce through the host. On cuda: cuCtxEnablePeerAccess from ctx's
 *  device's primary context to peer's, so it holds for every context of
 *  this process on those devices and for the CUDA runtime sharing them,
 *  until the process ends. Already enabled, the same device or the same
 *  context: METRALE_OK, nothing to do. UNSUPPORTED, the message saying
 *  why, when it is refused: no peer path between the devices (the driver's
 *  answer, or METRALE_TEST_HOST_NO_PEER on the host backend), the device
 *  already has the most peers the hardware allows, or the contexts run on
 *  two backends. INVALID_ARGUMENT for a dead ctx or peer; CONTEXT_LOST when
 *  either is lost. Thread-safe. */
metrale_status_t metrale_peer_access_enable(metrale_context_t* ctx, metrale_context_t* peer);

/** Copies bytes from src (memory of src_ctx) to dst (memory of dst_ctx) on
 *  src_ctx's default stream and waits for it. Peer access is not needed (the
 *  driver stages the copy through the host without it). src_ctx ==
 *  dst_ctx: exactly metrale_copy_d2d. Checks as any copy, each range
 *  against its own context: with checked pointers on in a context, a range
 *  outside its live allocations is OUT_OF_BOUNDS; the host backend refuses
 *  a range outside its device's memory with INVALID_ARGUMENT. Both checked
 *  before a byte moves. Counted (d2d_copies, d2d_bytes) and traced (as
 *  METRALE_TRACE_D2D) in src_ctx only. Statuses: INVALID_ARGUMENT (a dead
 *  context, a bad range), OUT_OF_BOUNDS, UNSUPPORTED (contexts of two
 *  backends), CAPTURE while src_ctx's default stream captures (a peer copy
 *  is never recorded into a graph: the graph would outlive what it names
 *  in the other context), CONTEXT_LOST when either context is lost,
 *  DRIVER. From a host kernel on src_ctx's default stream:
 *  INVALID_ARGUMENT (rule 5). Neither context may be destroyed during the
 *  call (rule 2). Thread-safe. */
metrale_status_t metrale_copy_peer(metrale_context_t* src_ctx, metrale_devptr_t src,
                                   metrale_context_t* dst_ctx, metrale_devptr_t dst,
                                   size_t bytes);
/** As metrale_copy_peer, on `stream`, a stream of src_ctx (NULL: its
 *  default stream; a stream of dst_ctx is INVALID_ARGUMENT), never
 *  waiting. The copy is ordered with the work of `stream` only: order
 *  dst_ctx's work that writes or reads dst before or after it yourself
 *  (synchronize the streams), and do not free dst, or src, before `stream`
 *  has passed the copy. CAPTURE, nothing recorded, while `stream` captures.
 *  src_ctx == dst_ctx: exactly metrale_copy_d2d_async. */
metrale_status_t metrale_copy_peer_async(metrale_context_t* src_ctx, metrale_devptr_t src,
                                         metrale_context_t* dst_ctx, metrale_devptr_t dst,
                                         size_t bytes, metrale_stream_t* stream);

/** *native gets the driver's stream behind `stream` (NULL: the default
 *  stream), for libraries that take one, such as NCCL or cuBLAS: on cuda
 *  a CUstream (the same type as cudaStream_t) of ctx's device's primary
 *  context, valid until `stream` is destroyed (the default stream: until
 *  the context is). Work others put on it is ordered with this library's
 *  work on that stream (metrale_stream_synchronize waits for both), but
 *  the library does not see it: no counters, no trace, no ledger. Do not
 *  destroy it. UNSUPPORTED on the host backend (it has no native stream);
 *  INVALID_ARGUMENT for a dead stream or NULL native; CONTEXT_LOST once
 *  lost. Thread-safe. */
metrale_status_t metrale_stream_native(metrale_context_t* ctx, metrale_stream_t* stream,
                                       void** native);

/** The process-wide ledger report: live bytes of every live context of this
 *  process, grouped by device (backend and ordinal; cuda devices first)
 *  and, within a device, by allocation site across its contexts, largest
 *  first: at most top_n sites per device (0 = all), only sites holding >=
 *  min_mib MiB (0 = all; a min_mib too large for 64 bits selects none).
 *  The text names the process id; each device line gives its bytes,
 *  allocations and contexts, each site line its bytes as "1.0 MiB (1048576
 *  bytes)", its allocations and file:line; a last line gives the totals.
 *  One report per process (per rank): docs/scaling.md shows how to merge
 *  the ranks' reports. Size query and BUFFER_TOO_SMALL as
 *  metrale_alloc_report. INVALID_ARGUMENT for NULL needed, or NULL buf
 *  with buflen > 0. Host-side only: answers on lost contexts too.
 *  Thread-safe: each context's figures are read under its own lock, one
 *  context after the other (two contexts' figures may be a moment apart);
 *  a context destroyed meanwhile is left out, and its
 *  metrale_context_destroy waits while the report reads that context. */
metrale_status_t metrale_alloc_report_all(size_t top_n, size_t min_mib, char* buf, size_t buflen,
                                          size_t* needed);
/** The per-device ledger: *bytes and *count (count may be NULL) get the
 *  live bytes and allocations of every live context of this process on
 *  device `device` of `backend` (0 and 0 when there is none).
 *  INVALID_ARGUMENT when backend is not METRALE_BACKEND_CUDA or
 *  METRALE_BACKEND_HOST, device < 0 or bytes is NULL. Thread-safe, as
 *  metrale_alloc_report_all. */
metrale_status_t metrale_device_live(metrale_backend_t backend, int device, size_t* bytes,
                                     size_t* count);
/* The event log                                                       */
/* ------------------------------------------------------------------ */
/* On request the context writes every alloc, free, failed (out-of-memory)
 * alloc and scan as one JSON object per line (docs/event-log.md has the
 * full format; `metrale-replay` replays a log, `metrale-timeline` draws it).
 * Each line has "ev" ("open", "alloc", "free", "oom", "scan", "close"),
 * "seq" (the context's event number), "t_ns" (CLOCK_MONOTONIC, ns) and
 * "ctx" (the context's handle value as a "0x..." string). Memory lines add
 * "stream" (the caller's stream handle value, "0x0" for the default/NULL
 * stream), "bytes" (as asked), "ptr" ("0x...", null on "oom"), "kind"
 * ("device" or "managed"), "site" ("file:line" of the allocation), "tag"
 * (the allocation's metrale_tag_push tag, null when none) and "pool" ({"reserved","in_use","cached"} bytes
 * from metrale_pool_stats sampled just after the event, null with the pool
 * off); "free" lines add "free_site" (null when the free gave none) and
 * "sweep" (true when metrale_sweep_unreleased or the context's destroy
 * freed it). "scan" lines say which scan ("redzone" or "quarantine"), how
 * many violations it found and up to 16 of them. Arenas and pinned host
 * memory are not logged; a scan with nothing to check (no pads, nothing
 * quarantined) writes no line.
 * Order: seq orders the events of one address as they happened (an alloc
 * takes its number as its entry is recorded, a free or sweep as the entry
 * leaves, under one lock, before the memory can be handed out again: a
 * sweep racing an alloc call is numbered after it), but lines
 * of different threads may reach the file out of seq order: sort by seq.
 * Cost: with no log open each alloc and free pays one branch; with one
 * open, one formatted line each plus a pool-stats read, appended to a
 * buffer written out every 64 KiB, on flush/close, at context destroy and
 * at process exit. Contexts of one process that log to the same file share
 * one writer (whole lines; the file is truncated at its first open). */

/** Opens (creates or truncates) path and logs this context's events there,
 *  from now until metrale_event_log_close or the context's destroy. path is
 *  copied. INVALID_ARGUMENT when path is NULL or empty, when it cannot be
 *  opened for writing or is not a regular file (the message has errno's
 *  text), or when a log is already open on this context (close it first).
 *  Works on a lost context. Thread-safe. */
metrale_status_t metrale_event_log_open(metrale_context_t* ctx, const char* path);

/** Writes a "close" line, writes out what is buffered and stops logging.
 *  METRALE_OK when no log is open. METRALE_ERROR_INTERNAL when lines could
 *  not be written (disk full, ...; the message says how many): the log is
 *  closed all the same. Thread-safe; an event racing with the close is
 *  written or dropped whole. */
metrale_status_t metrale_event_log_close(metrale_context_t* ctx);

/** Writes out the buffered lines now (the file then holds every event that
 *  completed before the call). METRALE_OK when no log is open; INTERNAL as
 *  metrale_event_log_close. Thread-safe. */
metrale_status_t metrale_event_log_flush(metrale_context_t* ctx);

#ifdef __cplusplus
}
#endif

#endif /* METRALE_GPU_H */
