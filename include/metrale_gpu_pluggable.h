/*
 * metrale_gpu_pluggable.h — libmetrale_gpu_pluggable, a companion library
 * installed beside libmetrale_gpu: the two entry points a framework's
 * pluggable allocator loads, over one process-wide context per device.
 *
 * PyTorch:
 *   alloc = torch.cuda.memory.CUDAPluggableAllocator(
 *       "libmetrale_gpu_pluggable.so", "metrale_pluggable_alloc", "metrale_pluggable_free")
 *   torch.cuda.memory.change_current_allocator(alloc)   # before any CUDA tensor
 * CuPy: cupy.cuda.set_allocator with a function that calls
 * metrale_pluggable_alloc and frees through metrale_pluggable_free (the
 * Python package `metrale` does both: install_torch_allocator(),
 * install_cupy_allocator()).
 *
 * Why a library of its own: the main library keeps no global context (every
 * call names one); these entry points need one per device, created on first
 * use, and a framework's signature (no context argument). It links
 * libmetrale_gpu and adds nothing to it.
 *
 * Behind the entry points: for each device ordinal, one context created on
 * the first allocation of that device (thread-safe; options from
 * metrale_pluggable_configure, the environment overriding them as for any
 * context), never destroyed (frameworks free tensors during interpreter
 * exit, after any hook of ours could run). Each allocation is
 * metrale_alloc_async on the framework's stream, wrapped once with
 * metrale_stream_wrap (cuda: the NULL stream is the legacy default stream),
 * so with the pool on (the default) a block freed on a stream goes to the
 * next allocation on that stream at once, PyTorch's own rule. Every
 * allocation is on the ledger with the calling thread's tag
 * (metrale_tag_push) and a site: the one the site function gives
 * (metrale_pluggable_set_site_fn), else "<pluggable allocator>":0.
 *
 * Limits of the frameworks' interfaces: an entry point cannot return a
 * status, so a failed allocation returns NULL and writes one line naming
 * the library's message to stderr (metrale_pluggable_last_error_message() on
 * that thread holds it too); PyTorch does not check for NULL, so a failed
 * allocation there surfaces as an illegal address later. PyTorch's
 * pluggable allocator also drops record_stream (it has no hook for it from
 * Python): a tensor used on a second stream must be synchronized before it
 * is freed, and torch.cuda.memory_reserved and friends are unsupported for
 * pluggable allocators (use metrale_pool_stats on
 * metrale_pluggable_context's context).
 */
#ifndef METRALE_GPU_PLUGGABLE_H
#define METRALE_GPU_PLUGGABLE_H

#include <sys/types.h> /* ssize_t */

#include "metrale_gpu.h"

#ifdef __cplusplus
extern "C" {
#endif

/** The largest device ordinal + 1 these entry points serve. */
#define METRALE_PLUGGABLE_MAX_DEVICES 64

/** PyTorch's alloc signature (void* alloc(ssize_t, int, cudaStream_t)):
 *  size bytes of device memory on `device`, ordered on the native `stream`.
 *  Returns NULL for size 0 (what PyTorch's own allocator gives; no message)
 *  and on any failure: a negative size, a device outside [0,
 *  METRALE_PLUGGABLE_MAX_DEVICES), a context that cannot be created, a
 *  stream that cannot be wrapped, out of memory; each failure writes one
 *  line to stderr with the library's message. Thread-safe. */
void* metrale_pluggable_alloc(ssize_t size, int device, void* stream);

/** PyTorch's free signature (void free(void*, ssize_t, int, cudaStream_t)):
 *  frees ptr on `stream` (metrale_free_async; PyTorch passes the stream the
 *  block was allocated on). size is not needed (the ledger knows it) and
 *  not checked. NULL is a no-op. A pointer that is not a live allocation of
 *  that device's context, or any other failure, writes one line to stderr
 *  and frees nothing. Thread-safe. */
void metrale_pluggable_free(void* ptr, ssize_t size, int device, void* stream);

/** Options for the contexts created from now on (opts NULL: the defaults;
 *  opts->device is ignored, each context gets its ordinal). The environment
 *  still overrides them (METRALE_REDZONE, METRALE_POOL, ...). Call it
 *  before the first allocation: INVALID_ARGUMENT (nothing changed) once any
 *  device's context exists, or for a struct_size the library does not
 *  know. Thread-safe. */
metrale_status_t metrale_pluggable_configure(const metrale_context_options_t* opts);

/** The context behind `device`, created now if needed, for ledger reports,
 *  scans and pool figures. Owned by this library: never destroy it.
 *  INVALID_ARGUMENT for NULL out or a device out of range; the statuses of
 *  metrale_context_create. Thread-safe. */
metrale_status_t metrale_pluggable_context(int device, metrale_context_t** out);

/** Gives the site (file, line) of an allocation: writes a NUL-ended file
 *  name into file (file_cap bytes) and *line, and returns nonzero; returns 0
 *  to leave the default site. Called on the allocating thread, before the
 *  allocation, with no lock of this library held. */
typedef int (*metrale_pluggable_site_fn)(char* file, size_t file_cap, int* line, void* user);

/** Sets (fn non-NULL) or clears (NULL) the site function every allocation
 *  asks from now on; the Python package sets one that names the allocating
 *  Python frame. Without one an allocation pays a single atomic load.
 *  Returns only once no call of the previous function is running, so its
 *  user pointer may be freed when it returns; INVALID_ARGUMENT (nothing
 *  changed) when called from inside a site function. Thread-safe. */
metrale_status_t metrale_pluggable_set_site_fn(metrale_pluggable_site_fn fn, void* user);

/** The message of this library's last failure on the calling thread (its
 *  own refusals, and the libmetrale_gpu message of a failed call it made);
 *  "" when none. Never NULL; valid until the next call of this library on
 *  this thread. The statuses above come with it. */
const char* metrale_pluggable_last_error_message(void);

#ifdef __cplusplus
}
#endif

#endif /* METRALE_GPU_PLUGGABLE_H */
