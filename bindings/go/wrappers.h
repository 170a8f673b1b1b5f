/* wrappers.h: each mg_ function calls one library function and, on failure,
 * copies the thread-local message before returning. Goroutines move between
 * OS threads between two cgo calls, so reading metrale_last_error_message()
 * in a second call could read another thread's message (or none). The copy
 * is malloc'ed; the Go side frees it (mgFree). */
#ifndef METRALE_GO_WRAPPERS_H
#define METRALE_GO_WRAPPERS_H

#include <metrale_gpu.h>
#include <stdlib.h>
#include <string.h>

static inline char* mg_message(metrale_status_t s) {
  if (s == METRALE_OK) return NULL;
  const char* m = metrale_last_error_message();
  return strdup(m ? m : "");
}

#define MG_CALL(call)                    \
  do {                                   \
    metrale_status_t mg_s_ = (call);     \
    *err = mg_message(mg_s_);            \
    return mg_s_;                        \
  } while (0)

typedef metrale_context_t mg_ctx;

static inline metrale_status_t mg_context_create(char** err, const metrale_context_options_t* o, mg_ctx** out) { MG_CALL(metrale_context_create(o, out)); }
static inline metrale_status_t mg_context_destroy(char** err, mg_ctx* c) { MG_CALL(metrale_context_destroy(c)); }
static inline metrale_status_t mg_context_fault(char** err, mg_ctx* c) { MG_CALL(metrale_context_fault(c)); }
static inline metrale_status_t mg_context_bind_thread(char** err, mg_ctx* c) { MG_CALL(metrale_context_bind_thread(c)); }
static inline metrale_status_t mg_log_set_level(char** err, metrale_log_level_t l) { MG_CALL(metrale_log_set_level(l)); }

static inline metrale_status_t mg_alloc_at(char** err, mg_ctx* c, size_t n, const char* f, int l, metrale_devptr_t* o) { MG_CALL(metrale_alloc_at(c, n, f, l, o)); }
static inline metrale_status_t mg_alloc_managed_at(char** err, mg_ctx* c, size_t n, const char* f, int l, metrale_devptr_t* o) { MG_CALL(metrale_alloc_managed_at(c, n, f, l, o)); }
static inline metrale_status_t mg_free(char** err, mg_ctx* c, metrale_devptr_t p) { MG_CALL(metrale_free_at(c, p, NULL, 0)); }
static inline metrale_status_t mg_host_alloc_pinned(char** err, mg_ctx* c, size_t n, void** o) { MG_CALL(metrale_host_alloc_pinned(c, n, o)); }
static inline metrale_status_t mg_host_free_pinned(char** err, mg_ctx* c, void* p) { MG_CALL(metrale_host_free_pinned(c, p)); }
static inline metrale_status_t mg_host_device_pointer(char** err, mg_ctx* c, void* p, metrale_devptr_t* o) { MG_CALL(metrale_host_device_pointer(c, p, o)); }
static inline metrale_status_t mg_live_bytes(char** err, mg_ctx* c, size_t* o) { MG_CALL(metrale_live_bytes(c, o)); }
static inline metrale_status_t mg_live_count(char** err, mg_ctx* c, size_t* o) { MG_CALL(metrale_live_count(c, o)); }
static inline metrale_status_t mg_chunk_slack_bytes(char** err, mg_ctx* c, size_t* o) { MG_CALL(metrale_chunk_slack_bytes(c, o)); }
static inline metrale_status_t mg_live_allocations(char** err, mg_ctx* c, metrale_allocation_t* o, size_t cap, size_t* n) { MG_CALL(metrale_live_allocations(c, o, cap, n)); }
static inline metrale_status_t mg_alloc_report(char** err, mg_ctx* c, size_t top, size_t mib, char* b, size_t len, size_t* need) { MG_CALL(metrale_alloc_report(c, top, mib, b, len, need)); }
static inline metrale_status_t mg_sweep_unreleased(char** err, mg_ctx* c, size_t* n) { MG_CALL(metrale_sweep_unreleased(c, n)); }
static inline metrale_status_t mg_redzone_scan(char** err, mg_ctx* c, metrale_redzone_violation_t* o, size_t cap, size_t* n) { MG_CALL(metrale_redzone_scan(c, o, cap, n)); }
static inline metrale_status_t mg_redzone_poison(char** err, mg_ctx* c, uint64_t lo, uint64_t hi) { MG_CALL(metrale_redzone_poison(c, lo, hi)); }

static inline metrale_status_t mg_copy_h2d(char** err, mg_ctx* c, const void* s, size_t n, metrale_devptr_t d) { MG_CALL(metrale_copy_h2d(c, s, n, d)); }
static inline metrale_status_t mg_copy_d2h(char** err, mg_ctx* c, metrale_devptr_t s, void* d, size_t n) { MG_CALL(metrale_copy_d2h(c, s, d, n)); }
static inline metrale_status_t mg_copy_d2h_on_stream(char** err, mg_ctx* c, metrale_devptr_t s, void* d, size_t n, metrale_stream_t* st) { MG_CALL(metrale_copy_d2h_on_stream(c, s, d, n, st)); }
static inline metrale_status_t mg_copy_h2d_async(char** err, mg_ctx* c, const void* s, size_t n, metrale_devptr_t d, metrale_stream_t* st) { MG_CALL(metrale_copy_h2d_async(c, s, n, d, st)); }
static inline metrale_status_t mg_copy_d2d(char** err, mg_ctx* c, metrale_devptr_t s, metrale_devptr_t d, size_t n) { MG_CALL(metrale_copy_d2d(c, s, d, n)); }
static inline metrale_status_t mg_copy_d2d_async(char** err, mg_ctx* c, metrale_devptr_t s, metrale_devptr_t d, size_t n, metrale_stream_t* st) { MG_CALL(metrale_copy_d2d_async(c, s, d, n, st)); }
static inline metrale_status_t mg_memset(char** err, mg_ctx* c, metrale_devptr_t d, uint8_t v, size_t n) { MG_CALL(metrale_memset(c, d, v, n)); }
static inline metrale_status_t mg_memset_async(char** err, mg_ctx* c, metrale_devptr_t d, uint8_t v, size_t n, metrale_stream_t* st) { MG_CALL(metrale_memset_async(c, d, v, n, st)); }

static inline metrale_status_t mg_module_load_data(char** err, mg_ctx* c, const char* name, const void* img, size_t n) { MG_CALL(metrale_module_load_data(c, name, img, n)); }
static inline metrale_status_t mg_module_load_file(char** err, mg_ctx* c, const char* name, const char* path) { MG_CALL(metrale_module_load_file(c, name, path)); }
static inline metrale_status_t mg_module_unload(char** err, mg_ctx* c, const char* name) { MG_CALL(metrale_module_unload(c, name)); }
static inline metrale_status_t mg_kernel_get_at(char** err, mg_ctx* c, const char* m, const char* f, const char* file, int line, metrale_kernel_t** k) { MG_CALL(metrale_kernel_get_at(c, m, f, file, line, k)); }
static inline metrale_status_t mg_module_register_host_params(char** err, mg_ctx* c, const char* m, const char* f, void* fn, void* user, const size_t* sizes, size_t n) { MG_CALL(metrale_module_register_host_params(c, m, f, (metrale_host_kernel_fn)fn, user, sizes, n)); }
static inline metrale_status_t mg_launch_packed(char** err, mg_ctx* c, metrale_kernel_t* k, metrale_dim3_t g, metrale_dim3_t b, uint32_t sh, metrale_stream_t* st, const void* args, size_t n) { MG_CALL(metrale_launch_packed(c, k, g, b, sh, st, args, n)); }

static inline metrale_status_t mg_stream_create(char** err, mg_ctx* c, metrale_stream_t** o) { MG_CALL(metrale_stream_create(c, o)); }
static inline metrale_status_t mg_stream_destroy(char** err, mg_ctx* c, metrale_stream_t* s) { MG_CALL(metrale_stream_destroy(c, s)); }
static inline metrale_status_t mg_stream_synchronize(char** err, mg_ctx* c, metrale_stream_t* s) { MG_CALL(metrale_stream_synchronize(c, s)); }
static inline metrale_status_t mg_stream_wait_event(char** err, mg_ctx* c, metrale_stream_t* s, metrale_event_t* e) { MG_CALL(metrale_stream_wait_event(c, s, e)); }
static inline metrale_status_t mg_event_create(char** err, mg_ctx* c, unsigned flags, metrale_event_t** o) { MG_CALL(metrale_event_create(c, flags, o)); }
static inline metrale_status_t mg_event_record(char** err, mg_ctx* c, metrale_event_t* e, metrale_stream_t* s) { MG_CALL(metrale_event_record(c, e, s)); }
static inline metrale_status_t mg_event_synchronize(char** err, mg_ctx* c, metrale_event_t* e) { MG_CALL(metrale_event_synchronize(c, e)); }
static inline metrale_status_t mg_event_query(char** err, mg_ctx* c, metrale_event_t* e, int* done) { MG_CALL(metrale_event_query(c, e, done)); }
static inline metrale_status_t mg_event_destroy(char** err, mg_ctx* c, metrale_event_t* e) { MG_CALL(metrale_event_destroy(c, e)); }
static inline metrale_status_t mg_event_elapsed_ms(char** err, mg_ctx* c, metrale_event_t* a, metrale_event_t* b, float* ms) { MG_CALL(metrale_event_elapsed_ms(c, a, b, ms)); }

static inline metrale_status_t mg_graph_begin_capture(char** err, mg_ctx* c, metrale_stream_t* s) { MG_CALL(metrale_graph_begin_capture(c, s)); }
static inline metrale_status_t mg_graph_end_capture(char** err, mg_ctx* c, metrale_stream_t* s, metrale_graph_t** g) { MG_CALL(metrale_graph_end_capture(c, s, g)); }
static inline metrale_status_t mg_graph_abort_capture(char** err, mg_ctx* c, metrale_stream_t* s) { MG_CALL(metrale_graph_abort_capture(c, s)); }
static inline metrale_status_t mg_graph_launch(char** err, mg_ctx* c, metrale_graph_t* g, metrale_stream_t* s) { MG_CALL(metrale_graph_launch(c, g, s)); }
static inline metrale_status_t mg_graph_destroy(char** err, mg_ctx* c, metrale_graph_t* g) { MG_CALL(metrale_graph_destroy(c, g)); }

static inline metrale_status_t mg_device_info(char** err, mg_ctx* c, metrale_device_info_t* i) { MG_CALL(metrale_device_info(c, i)); }
static inline metrale_status_t mg_total_memory(char** err, mg_ctx* c, size_t* n) { MG_CALL(metrale_total_memory(c, n)); }
static inline metrale_status_t mg_free_memory(char** err, mg_ctx* c, size_t* n) { MG_CALL(metrale_free_memory(c, n)); }
static inline metrale_status_t mg_counters(char** err, mg_ctx* c, metrale_counters_t* o) { o->struct_size = sizeof *o; MG_CALL(metrale_counters(c, o)); }
static inline metrale_status_t mg_counters_reset(char** err, mg_ctx* c) { MG_CALL(metrale_counters_reset(c)); }
static inline metrale_status_t mg_launch_trace_enable(char** err, mg_ctx* c, int on) { MG_CALL(metrale_launch_trace_enable(c, on)); }
static inline metrale_status_t mg_launch_trace_read(char** err, mg_ctx* c, metrale_trace_entry_t* o, size_t cap, size_t* n) { MG_CALL(metrale_launch_trace_read(c, o, cap, n)); }
static inline metrale_status_t mg_kernel_audit_read(char** err, mg_ctx* c, metrale_kernel_audit_entry_t* o, size_t cap, size_t* n) { MG_CALL(metrale_kernel_audit_read(c, o, cap, n)); }

/* The log bridge (log_bridge.c) forwards to the exported Go function. */
void mg_log_bridge(metrale_log_level_t level, const char* message, void* user);
static inline metrale_status_t mg_log_set_handle(uintptr_t h) {
  return h ? metrale_log_set_callback(mg_log_bridge, (void*)h) : metrale_log_set_callback(NULL, NULL);
}

#endif
