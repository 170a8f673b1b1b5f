/* Bad input for every function of the header, table-driven: a NULL context,
 * a destroyed context, NULL out-parameters, unknown, freed and interior
 * pointers, zero and oversize requests, unknown names, destroyed handles.
 * Every row must get its status and a non-empty message, and leave the
 * ledger of the live context as it was. Each case runs its whole table and
 * lists every row that went wrong before failing. */
#include <stdlib.h>

#include "test_support.h"

typedef struct fx {
  metrale_context_t* ctx;  /* live */
  metrale_context_t* bad;  /* NULL or a destroyed context, per case */
  metrale_devptr_t p, freed, arena;
  void* pinned;
  metrale_stream_t* s;
  metrale_stream_t* dead_stream;
  metrale_event_t* e;
  metrale_event_t* e2;
  metrale_event_t* dead_event;
  metrale_event_t* unrecorded;  /* timing, never recorded */
  metrale_event_t* no_timing;   /* recorded, timing disabled */
  metrale_graph_t* g;
  metrale_graph_t* dead_graph;
  metrale_kernel_t* k;
  /* out-parameter targets */
  metrale_devptr_t out;
  void* hp;
  size_t n;
  int yes;
  float ms;
  metrale_kernel_t* kout;
  metrale_stream_t* sout;
  metrale_event_t* eout;
  metrale_graph_t* gout;
  metrale_device_info_t info;
  metrale_counters_t counters;
  metrale_allocation_t allocs[2];
  metrale_redzone_violation_t viol[2];
  metrale_trace_entry_t trace[2];
  metrale_kernel_audit_entry_t audit[2];
  metrale_kernel_timing_t timing[2];
  unsigned char host[256];
  char text[64];
} fx_t;

static metrale_status_t noop_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  return METRALE_OK;
}

/* A host kernel answering a status outside the enum. */
static metrale_status_t bogus_status_kernel(const metrale_host_kernel_call_t* call, void* user) {
  (void)call;
  (void)user;
  metrale_status_t bogus;
  int bits = 43;
  memcpy(&bogus, &bits, sizeof bogus);
  return bogus;
}

/* Rows that need a capture in progress: the call under test is made while
 * f->s captures, then the capture is aborted (a success, which leaves the
 * failed call's message in place). */
static metrale_status_t while_capturing(void* fp, int which);

static const metrale_dim3_t ONE = {1, 1, 1};
static const metrale_dim3_t ZERO_X = {0, 1, 1};
static const size_t ONE_SIZE[1] = {8};

#define INV METRALE_ERROR_INVALID_ARGUMENT
#define NF METRALE_ERROR_NOT_FOUND
#define OOM METRALE_ERROR_OUT_OF_MEMORY
#define TIB ((size_t)1 << 40)

/* Every function that takes a context, called with f->bad as the context and
 * otherwise valid arguments. */
#define CONTEXT_CASES(X)                                                                   \
  X(bind_thread, metrale_context_bind_thread(f->bad))                                      \
  X(context_fault, metrale_context_fault(f->bad))                                          \
  X(alloc_at, metrale_alloc_at(f->bad, 64, "f.c", 1, &f->out))                             \
  X(alloc_managed_at, metrale_alloc_managed_at(f->bad, 64, "f.c", 1, &f->out))             \
  X(free, metrale_free(f->bad, f->p))                                                      \
  X(alloc_arena, metrale_alloc_arena(f->bad, 64, &f->out))                                 \
  X(free_arena, metrale_free_arena(f->bad, f->arena))                                      \
  X(host_alloc_pinned, metrale_host_alloc_pinned(f->bad, 64, &f->hp))                      \
  X(host_free_pinned, metrale_host_free_pinned(f->bad, f->pinned))                         \
  X(host_register, metrale_host_register(f->bad, f->host, sizeof f->host))                 \
  X(host_unregister, metrale_host_unregister(f->bad, f->host))                             \
  X(host_is_pinned, metrale_host_is_pinned(f->bad, f->pinned, 16, &f->yes))                \
  X(host_device_pointer, metrale_host_device_pointer(f->bad, f->pinned, &f->out))          \
  X(live_bytes, metrale_live_bytes(f->bad, &f->n))                                         \
  X(live_count, metrale_live_count(f->bad, &f->n))                                         \
  X(chunk_slack_bytes, metrale_chunk_slack_bytes(f->bad, &f->n))                           \
  X(live_allocations, metrale_live_allocations(f->bad, f->allocs, 2, &f->n))               \
  X(alloc_report, metrale_alloc_report(f->bad, 0, 0, f->text, sizeof f->text, &f->n))      \
  X(sweep_unreleased, metrale_sweep_unreleased(f->bad, &f->n))                             \
  X(redzone_scan, metrale_redzone_scan(f->bad, f->viol, 2, &f->n))                         \
  X(redzone_poison, metrale_redzone_poison(f->bad, 0, 10))                                 \
  X(copy_h2d, metrale_copy_h2d(f->bad, f->host, 16, f->p))                                 \
  X(copy_d2h, metrale_copy_d2h(f->bad, f->p, f->host, 16))                                 \
  X(copy_d2h_on_stream, metrale_copy_d2h_on_stream(f->bad, f->p, f->host, 16, f->s))       \
  X(copy_d2h_async, metrale_copy_d2h_async(f->bad, f->p, f->host, 16, f->s))               \
  X(copy_d2d, metrale_copy_d2d(f->bad, f->p, f->p + 64, 16))                               \
  X(copy_h2d_async, metrale_copy_h2d_async(f->bad, f->host, 16, f->p, f->s))               \
  X(copy_h2d_async_retained, metrale_copy_h2d_async_retained(f->bad, f->host, 16, f->p, f->s)) \
  X(copy_d2d_async, metrale_copy_d2d_async(f->bad, f->p, f->p + 64, 16, f->s))             \
  X(copy_d2d_2d_async, metrale_copy_d2d_2d_async(f->bad, f->p, 32, f->p + 128, 32, 16, 2, f->s)) \
  X(memset, metrale_memset(f->bad, f->p, 0, 16))                                           \
  X(memset_async, metrale_memset_async(f->bad, f->p, 0, 16, f->s))                         \
  X(module_load_data, metrale_module_load_data(f->bad, "m", f->host, 16))                  \
  X(module_load_file, metrale_module_load_file(f->bad, "m", "/dev/null"))                  \
  X(module_unload, metrale_module_unload(f->bad, "bad_input_mod"))                         \
  X(kernel_get_at, metrale_kernel_get_at(f->bad, "bad_input_mod", "noop", "f.c", 1, &f->kout)) \
  X(module_register_host, metrale_module_register_host(f->bad, "m2", "f", noop_kernel, NULL)) \
  X(module_register_host_params,                                                           \
    metrale_module_register_host_params(f->bad, "m2", "f", noop_kernel, NULL, ONE_SIZE, 1)) \
  X(launch, metrale_launch(f->bad, f->k, ONE, ONE, 0, f->s, NULL))                         \
  X(launch_packed, metrale_launch_packed(f->bad, f->k, ONE, ONE, 0, f->s, NULL, 0))        \
  X(stream_create, metrale_stream_create(f->bad, &f->sout))                                \
  X(stream_destroy, metrale_stream_destroy(f->bad, f->s))                                  \
  X(stream_synchronize, metrale_stream_synchronize(f->bad, f->s))                          \
  X(event_create, metrale_event_create(f->bad, METRALE_EVENT_DEFAULT, &f->eout))           \
  X(event_record, metrale_event_record(f->bad, f->e, f->s))                                \
  X(event_synchronize, metrale_event_synchronize(f->bad, f->e))                            \
  X(event_query, metrale_event_query(f->bad, f->e, &f->yes))                               \
  X(event_destroy, metrale_event_destroy(f->bad, f->e))                                    \
  X(stream_wait_event, metrale_stream_wait_event(f->bad, f->s, f->e))                      \
  X(event_elapsed_ms, metrale_event_elapsed_ms(f->bad, f->e, f->e2, &f->ms))               \
  X(graph_begin_capture, metrale_graph_begin_capture(f->bad, f->s))                        \
  X(graph_end_capture, metrale_graph_end_capture(f->bad, f->s, &f->gout))                  \
  X(graph_abort_capture, metrale_graph_abort_capture(f->bad, f->s))                        \
  X(graph_launch, metrale_graph_launch(f->bad, f->g, f->s))                                \
  X(graph_destroy, metrale_graph_destroy(f->bad, f->g))                                    \
  X(device_info, metrale_device_info(f->bad, &f->info))                                    \
  X(total_memory, metrale_total_memory(f->bad, &f->n))                                     \
  X(free_memory, metrale_free_memory(f->bad, &f->n))                                       \
  X(device_free_memory, metrale_device_free_memory(f->bad, &f->n))                         \
  X(counters, metrale_counters(f->bad, &f->counters))                                      \
  X(counters_reset, metrale_counters_reset(f->bad))                                        \
  X(launch_trace_enable, metrale_launch_trace_enable(f->bad, 1))                           \
  X(launch_trace_read, metrale_launch_trace_read(f->bad, f->trace, 2, &f->n))              \
  X(kernel_audit_read, metrale_kernel_audit_read(f->bad, f->audit, 2, &f->n))              \
  X(kernel_timing_enable, metrale_kernel_timing_enable(f->bad, 1))                         \
  X(kernel_timings_read, metrale_kernel_timings_read(f->bad, f->timing, 2, &f->n))

/* NULL out-parameters and NULL inputs, on the live context. */
#define NULL_CASES(X)                                                                      \
  X(alloc_at_null_out, INV, metrale_alloc_at(f->ctx, 64, "f.c", 1, NULL))                   \
  X(alloc_managed_null_out, INV, metrale_alloc_managed_at(f->ctx, 64, "f.c", 1, NULL))      \
  X(alloc_arena_null_out, INV, metrale_alloc_arena(f->ctx, 64, NULL))                       \
  X(host_alloc_pinned_null_out, INV, metrale_host_alloc_pinned(f->ctx, 64, NULL))           \
  X(host_register_null, INV, metrale_host_register(f->ctx, NULL, 64))                       \
  X(host_is_pinned_null_yes, INV, metrale_host_is_pinned(f->ctx, f->pinned, 16, NULL))      \
  X(host_device_pointer_null_out, INV, metrale_host_device_pointer(f->ctx, f->pinned, NULL)) \
  X(live_bytes_null, INV, metrale_live_bytes(f->ctx, NULL))                                 \
  X(live_count_null, INV, metrale_live_count(f->ctx, NULL))                                 \
  X(chunk_slack_null, INV, metrale_chunk_slack_bytes(f->ctx, NULL))                         \
  X(live_allocations_null_count, INV, metrale_live_allocations(f->ctx, f->allocs, 2, NULL)) \
  X(live_allocations_null_out_cap, INV, metrale_live_allocations(f->ctx, NULL, 2, &f->n))   \
  X(alloc_report_null_needed, INV, metrale_alloc_report(f->ctx, 0, 0, f->text, 64, NULL))   \
  X(alloc_report_null_buf_len, INV, metrale_alloc_report(f->ctx, 0, 0, NULL, 64, &f->n))    \
  X(redzone_scan_null_count, INV, metrale_redzone_scan(f->ctx, f->viol, 2, NULL))           \
  X(redzone_scan_null_out_cap, INV, metrale_redzone_scan(f->ctx, NULL, 2, &f->n))           \
  X(copy_h2d_null_src, INV, metrale_copy_h2d(f->ctx, NULL, 16, f->p))                       \
  X(copy_d2h_null_dst, INV, metrale_copy_d2h(f->ctx, f->p, NULL, 16))                       \
  X(copy_d2h_on_stream_null_dst, INV, metrale_copy_d2h_on_stream(f->ctx, f->p, NULL, 16, f->s)) \
  X(copy_d2h_async_null_dst, INV, metrale_copy_d2h_async(f->ctx, f->p, NULL, 16, f->s))     \
  X(copy_h2d_async_null_src, INV, metrale_copy_h2d_async(f->ctx, NULL, 16, f->p, f->s))     \
  X(copy_h2d_retained_null_src, INV,                                                        \
    metrale_copy_h2d_async_retained(f->ctx, NULL, 16, f->p, f->s))                          \
  X(module_load_data_null_name, INV, metrale_module_load_data(f->ctx, NULL, f->host, 16))   \
  X(module_load_data_null_image, INV, metrale_module_load_data(f->ctx, "m", NULL, 16))      \
  X(module_load_data_size_0, INV, metrale_module_load_data(f->ctx, "m", f->host, 0))        \
  X(module_load_file_null_name, INV, metrale_module_load_file(f->ctx, NULL, "/dev/null"))   \
  X(module_load_file_null_path, INV, metrale_module_load_file(f->ctx, "m", NULL))           \
  X(module_unload_null, INV, metrale_module_unload(f->ctx, NULL))                           \
  X(kernel_get_null_module, INV, metrale_kernel_get_at(f->ctx, NULL, "f", "f.c", 1, &f->kout)) \
  X(kernel_get_null_func, INV, metrale_kernel_get_at(f->ctx, "m", NULL, "f.c", 1, &f->kout)) \
  X(kernel_get_null_out, INV,                                                               \
    metrale_kernel_get_at(f->ctx, "bad_input_mod", "noop", "f.c", 1, NULL))                 \
  X(launch_null_kernel, INV, metrale_launch(f->ctx, NULL, ONE, ONE, 0, f->s, NULL))         \
  X(launch_packed_null_kernel, INV,                                                         \
    metrale_launch_packed(f->ctx, NULL, ONE, ONE, 0, f->s, NULL, 0))                        \
  X(stream_create_null_out, INV, metrale_stream_create(f->ctx, NULL))                       \
  X(event_create_null_out, INV, metrale_event_create(f->ctx, METRALE_EVENT_DEFAULT, NULL))  \
  X(event_record_null_event, INV, metrale_event_record(f->ctx, NULL, f->s))                 \
  X(event_synchronize_null, INV, metrale_event_synchronize(f->ctx, NULL))                   \
  X(event_query_null_event, INV, metrale_event_query(f->ctx, NULL, &f->yes))                \
  X(event_query_null_done, INV, metrale_event_query(f->ctx, f->e, NULL))                    \
  X(stream_wait_event_null, INV, metrale_stream_wait_event(f->ctx, f->s, NULL))             \
  X(elapsed_null_start, INV, metrale_event_elapsed_ms(f->ctx, NULL, f->e2, &f->ms))         \
  X(elapsed_null_end, INV, metrale_event_elapsed_ms(f->ctx, f->e, NULL, &f->ms))            \
  X(elapsed_null_ms, INV, metrale_event_elapsed_ms(f->ctx, f->e, f->e2, NULL))              \
  X(graph_launch_null, INV, metrale_graph_launch(f->ctx, NULL, f->s))                       \
  X(device_info_null, INV, metrale_device_info(f->ctx, NULL))                               \
  X(total_memory_null, INV, metrale_total_memory(f->ctx, NULL))                             \
  X(free_memory_null, INV, metrale_free_memory(f->ctx, NULL))                               \
  X(device_free_memory_null, INV, metrale_device_free_memory(f->ctx, NULL))                 \
  X(counters_null, INV, metrale_counters(f->ctx, NULL))                                     \
  X(launch_trace_read_null_count, INV, metrale_launch_trace_read(f->ctx, f->trace, 2, NULL)) \
  X(launch_trace_read_null_out, INV, metrale_launch_trace_read(f->ctx, NULL, 2, &f->n))     \
  X(kernel_audit_read_null_count, INV, metrale_kernel_audit_read(f->ctx, f->audit, 2, NULL)) \
  X(kernel_audit_read_null_out, INV, metrale_kernel_audit_read(f->ctx, NULL, 2, &f->n))     \
  X(kernel_timings_read_null_count, INV,                                                    \
    metrale_kernel_timings_read(f->ctx, f->timing, 2, NULL))                                \
  X(kernel_timings_read_null_out, INV, metrale_kernel_timings_read(f->ctx, NULL, 2, &f->n)) \
  X(options_init_null, INV, metrale_context_options_init(NULL))                             \
  X(context_create_null_out, INV, metrale_context_create(NULL, NULL))

/* Pointers, sizes, names and values the library must refuse. */
#define VALUE_CASES(X)                                                                     \
  X(free_unknown, NF, metrale_free(f->ctx, 0xdead0000ull))                                  \
  X(free_freed, NF, metrale_free(f->ctx, f->freed))                                         \
  X(free_interior, INV, metrale_free(f->ctx, f->p + 8))                                     \
  X(free_arena_pointer, NF, metrale_free(f->ctx, f->arena))                                 \
  X(free_arena_unknown, NF, metrale_free_arena(f->ctx, 0xdead0000ull))                      \
  X(free_arena_ledger_pointer, NF, metrale_free_arena(f->ctx, f->p))                        \
  X(host_free_pinned_unknown, NF, metrale_host_free_pinned(f->ctx, f->host))                \
  X(host_free_pinned_interior, NF, metrale_host_free_pinned(f->ctx, (char*)f->pinned + 8))  \
  X(host_unregister_unknown, NF, metrale_host_unregister(f->ctx, f->host))                  \
  X(host_device_pointer_unknown, NF, metrale_host_device_pointer(f->ctx, f->host, &f->out)) \
  X(alloc_zero, INV, metrale_alloc_at(f->ctx, 0, "f.c", 1, &f->out))                        \
  X(alloc_managed_zero, INV, metrale_alloc_managed_at(f->ctx, 0, "f.c", 1, &f->out))        \
  X(alloc_arena_zero, INV, metrale_alloc_arena(f->ctx, 0, &f->out))                         \
  X(host_alloc_pinned_zero, INV, metrale_host_alloc_pinned(f->ctx, 0, &f->hp))              \
  X(host_register_zero, INV, metrale_host_register(f->ctx, f->host, 0))                     \
  X(host_register_overlap, INV, metrale_host_register(f->ctx, (char*)f->pinned + 16, 64))   \
  X(host_is_pinned_zero, INV, metrale_host_is_pinned(f->ctx, f->pinned, 0, &f->yes))        \
  X(alloc_oversize, OOM, metrale_alloc_at(f->ctx, TIB, "f.c", 1, &f->out))                  \
  X(alloc_arena_oversize, OOM, metrale_alloc_arena(f->ctx, TIB, &f->out))                   \
  X(host_alloc_pinned_oversize, OOM, metrale_host_alloc_pinned(f->ctx, TIB, &f->hp))        \
  X(kernel_get_unknown_module, NF,                                                          \
    metrale_kernel_get_at(f->ctx, "no_such_module", "noop", "f.c", 1, &f->kout))            \
  X(kernel_get_unknown_func, NF,                                                            \
    metrale_kernel_get_at(f->ctx, "bad_input_mod", "no_such_func", "f.c", 1, &f->kout))     \
  X(module_unload_unknown, NF, metrale_module_unload(f->ctx, "no_such_module"))             \
  X(launch_zero_grid, INV, metrale_launch(f->ctx, f->k, ZERO_X, ONE, 0, f->s, NULL))        \
  X(launch_zero_block, INV, metrale_launch(f->ctx, f->k, ONE, ZERO_X, 0, f->s, NULL))       \
  X(launch_packed_zero_grid, INV,                                                           \
    metrale_launch_packed(f->ctx, f->k, ZERO_X, ONE, 0, f->s, NULL, 0))                     \
  X(copy_2d_small_src_pitch, INV,                                                           \
    metrale_copy_d2d_2d_async(f->ctx, f->p, 8, f->p + 128, 32, 16, 2, f->s))                \
  X(copy_2d_small_dst_pitch, INV,                                                           \
    metrale_copy_d2d_2d_async(f->ctx, f->p, 32, f->p + 128, 8, 16, 2, f->s))                \
  X(redzone_poison_lo_above_hi, INV, metrale_redzone_poison(f->ctx, 3, 2))                  \
  X(event_create_unknown_flags, INV, metrale_event_create(f->ctx, 0x40u, &f->eout))         \
  X(stream_destroy_default, INV, metrale_stream_destroy(f->ctx, metrale_default_stream(f->ctx))) \
  X(graph_end_not_capturing, METRALE_ERROR_CAPTURE, metrale_graph_end_capture(f->ctx, f->s, &f->gout)) \
  X(log_level_out_of_enum, INV, metrale_log_set_level((metrale_log_level_t)99))             \
  X(alloc_report_short, METRALE_ERROR_BUFFER_TOO_SMALL,                                     \
    metrale_alloc_report(f->ctx, 0, 0, f->text, 2, &f->n))                                  \
  X(kernel_audit_read_short, METRALE_ERROR_BUFFER_TOO_SMALL,                                \
    metrale_kernel_audit_read(f->ctx, f->audit, 1, &f->n))                                  \
  X(counters_bad_struct_size, INV,                                                          \
    (f->counters.struct_size = 3, metrale_counters(f->ctx, &f->counters)))                  \
  X(launch_packed_wrong_size, INV,                                                          \
    metrale_launch_packed(f->ctx, f->k, ONE, ONE, 0, f->s, f->host, 8))                     \
  X(launch_packed_null_args, INV,                                                           \
    metrale_launch_packed(f->ctx, f->k, ONE, ONE, 0, f->s, NULL, 8))                        \
  X(elapsed_unrecorded, INV, metrale_event_elapsed_ms(f->ctx, f->e, f->unrecorded, &f->ms)) \
  X(elapsed_no_timing, INV, metrale_event_elapsed_ms(f->ctx, f->no_timing, f->e2, &f->ms))  \
  X(begin_capture_twice, METRALE_ERROR_CAPTURE, while_capturing(f, 0))                      \
  X(synchronize_capturing, METRALE_ERROR_CAPTURE, while_capturing(f, 1))                    \
  X(abort_then_end, METRALE_ERROR_CAPTURE, while_capturing(f, 2))                           \
  X(host_register_twice, INV, metrale_host_register(f->ctx, f->pinned, 64))                 \
  X(module_load_file_missing, NF,                                                          \
    metrale_module_load_file(f->ctx, "m", "/no/such/dir/module.fatbin"))

/* Host backend only: device ranges it never handed out, modules it cannot
 * load, a host kernel answering a status outside the enum. */
#define HOST_VALUE_CASES(X)                                                                \
  X(copy_h2d_foreign, INV, metrale_copy_h2d(f->ctx, f->host, 16, 0x10))                     \
  X(copy_d2h_foreign, INV, metrale_copy_d2h(f->ctx, 0x10, f->host, 16))                     \
  X(copy_d2h_on_stream_foreign, INV,                                                        \
    metrale_copy_d2h_on_stream(f->ctx, 0x10, f->host, 16, f->s))                            \
  X(copy_d2h_async_foreign, INV, metrale_copy_d2h_async(f->ctx, 0x10, f->host, 16, f->s))   \
  X(copy_h2d_async_foreign, INV, metrale_copy_h2d_async(f->ctx, f->host, 16, 0x10, f->s))   \
  X(copy_h2d_retained_foreign, INV,                                                         \
    metrale_copy_h2d_async_retained(f->ctx, f->host, 16, 0x10, f->s))                       \
  X(copy_d2d_foreign_dst, INV, metrale_copy_d2d(f->ctx, f->p, 0x10, 16))                    \
  X(copy_d2d_async_foreign_src, INV, metrale_copy_d2d_async(f->ctx, 0x10, f->p, 16, f->s))  \
  X(copy_d2d_freed, INV, metrale_copy_d2d(f->ctx, f->p, f->freed, 16))                      \
  X(copy_2d_foreign, INV, metrale_copy_d2d_2d_async(f->ctx, 0x10, 32, f->p, 32, 16, 2, f->s)) \
  X(copy_2d_span_overflows, INV,                                                            \
    metrale_copy_d2d_2d_async(f->ctx, f->p, SIZE_MAX / 2, f->p, 32, 16, 4, f->s))           \
  X(memset_foreign, INV, metrale_memset(f->ctx, 0x10, 0, 16))                               \
  X(memset_async_past_end, INV, metrale_memset_async(f->ctx, f->p, 0, (size_t)1 << 40, f->s)) \
  X(copy_h2d_wraps, INV, metrale_copy_h2d(f->ctx, f->host, SIZE_MAX, f->p + 8))             \
  X(module_load_data_on_host, METRALE_ERROR_UNSUPPORTED,                                   \
    metrale_module_load_data(f->ctx, "garbage", f->host, sizeof f->host))                   \
  X(kernel_bogus_status, METRALE_ERROR_DRIVER, launch_bogus(f))

/* Handles destroyed before the call. */
#define HANDLE_CASES(X)                                                                    \
  X(stream_synchronize_dead, metrale_stream_synchronize(f->ctx, f->dead_stream))            \
  X(stream_destroy_dead, metrale_stream_destroy(f->ctx, f->dead_stream))                    \
  X(memset_async_dead_stream, metrale_memset_async(f->ctx, f->p, 0, 16, f->dead_stream))    \
  X(copy_d2h_async_dead_stream,                                                             \
    metrale_copy_d2h_async(f->ctx, f->p, f->host, 16, f->dead_stream))                      \
  X(launch_dead_stream, metrale_launch(f->ctx, f->k, ONE, ONE, 0, f->dead_stream, NULL))    \
  X(event_record_dead_stream, metrale_event_record(f->ctx, f->e, f->dead_stream))           \
  X(begin_capture_dead_stream, metrale_graph_begin_capture(f->ctx, f->dead_stream))         \
  X(is_capturing_dead_stream_is_1,                                                          \
    metrale_stream_is_capturing(f->ctx, f->dead_stream) == 1 ? INV : METRALE_OK)            \
  X(event_record_dead, metrale_event_record(f->ctx, f->dead_event, f->s))                   \
  X(event_synchronize_dead, metrale_event_synchronize(f->ctx, f->dead_event))               \
  X(event_query_dead, metrale_event_query(f->ctx, f->dead_event, &f->yes))                  \
  X(event_destroy_dead, metrale_event_destroy(f->ctx, f->dead_event))                       \
  X(stream_wait_dead_event, metrale_stream_wait_event(f->ctx, f->s, f->dead_event))         \
  X(elapsed_dead_event, metrale_event_elapsed_ms(f->ctx, f->e, f->dead_event, &f->ms))      \
  X(graph_launch_dead, metrale_graph_launch(f->ctx, f->dead_graph, f->s))                   \
  X(graph_destroy_dead, metrale_graph_destroy(f->ctx, f->dead_graph))

static metrale_status_t launch_bogus(fx_t* f) {
  metrale_kernel_t* k = NULL;
  if (metrale_kernel_get(f->ctx, "bad_input_mod", "bogus", &k) != METRALE_OK) {
    MT_OK(metrale_module_register_host_params(f->ctx, "bad_input_mod", "bogus",
                                              bogus_status_kernel, NULL, ONE_SIZE, 0));
    MT_OK(metrale_kernel_get(f->ctx, "bad_input_mod", "bogus", &k));
  }
  return metrale_launch(f->ctx, k, ONE, ONE, 0, f->s, NULL);
}

static metrale_status_t while_capturing(void* fp, int which) {
  fx_t* f = fp;
  MT_OK(metrale_graph_begin_capture(f->ctx, f->s));
  metrale_status_t got;
  if (which == 0) {
    got = metrale_graph_begin_capture(f->ctx, f->s);
  } else if (which == 1) {
    got = metrale_stream_synchronize(f->ctx, f->s);
  } else {
    MT_OK(metrale_graph_abort_capture(f->ctx, f->s));
    got = metrale_graph_end_capture(f->ctx, f->s, &f->gout);
    return got; /* nothing to abort */
  }
  MT_OK(metrale_graph_abort_capture(f->ctx, f->s));
  return got;
}

#define DEFINE_CTX(name, expr) \
  static metrale_status_t ctx_##name(fx_t* f) { return (expr); }
#define DEFINE_VAL(name, want, expr) \
  static metrale_status_t val_##name(fx_t* f) { (void)f; return (expr); }
#define DEFINE_HANDLE(name, expr) \
  static metrale_status_t handle_##name(fx_t* f) { return (expr); }
CONTEXT_CASES(DEFINE_CTX)
NULL_CASES(DEFINE_VAL)
VALUE_CASES(DEFINE_VAL)
HOST_VALUE_CASES(DEFINE_VAL)
HANDLE_CASES(DEFINE_HANDLE)

typedef struct {
  const char* name;
  metrale_status_t (*fn)(fx_t*);
  metrale_status_t want;
} row_t;

#define ROW_CTX(name, expr) {#name, ctx_##name, INV},
#define ROW_VAL(name, want, expr) {#name, val_##name, want},
#define ROW_HANDLE(name, expr) {#name, handle_##name, INV},
static const row_t context_rows[] = {CONTEXT_CASES(ROW_CTX)};
static const row_t null_rows[] = {NULL_CASES(ROW_VAL)};
static const row_t value_rows[] = {VALUE_CASES(ROW_VAL)};
static const row_t host_value_rows[] = {HOST_VALUE_CASES(ROW_VAL)};
static const row_t handle_rows[] = {HANDLE_CASES(ROW_HANDLE)};

/* --- fixture ---------------------------------------------------------------- */

static void fx_open(fx_t* f) {
  memset(f, 0, sizeof *f);
  f->ctx = mt_open(NULL);
  MT_OK(metrale_alloc(f->ctx, 1024, &f->p));
  /* 16 MiB: a chunk of its own in the pool, which the trim gives back to the
   * driver, so the address is freed memory there too. */
  MT_OK(metrale_alloc(f->ctx, 16u << 20, &f->freed));
  MT_OK(metrale_free(f->ctx, f->freed));
  MT_OK(metrale_pool_trim(f->ctx, 0, NULL));
  MT_OK(metrale_alloc_arena(f->ctx, 1024, &f->arena));
  MT_OK(metrale_host_alloc_pinned(f->ctx, 4096, &f->pinned));
  MT_OK(metrale_stream_create(f->ctx, &f->s));
  MT_OK(metrale_stream_create(f->ctx, &f->dead_stream));
  MT_OK(metrale_stream_destroy(f->ctx, f->dead_stream));
  MT_OK(metrale_event_create(f->ctx, METRALE_EVENT_DEFAULT, &f->e));
  MT_OK(metrale_event_create(f->ctx, METRALE_EVENT_DEFAULT, &f->e2));
  MT_OK(metrale_event_record(f->ctx, f->e, f->s));
  MT_OK(metrale_event_record(f->ctx, f->e2, f->s));
  MT_OK(metrale_event_create(f->ctx, METRALE_EVENT_DEFAULT, &f->unrecorded));
  MT_OK(metrale_event_create(f->ctx, METRALE_EVENT_DISABLE_TIMING, &f->no_timing));
  MT_OK(metrale_event_record(f->ctx, f->no_timing, f->s));
  MT_OK(metrale_event_create(f->ctx, METRALE_EVENT_DEFAULT, &f->dead_event));
  MT_OK(metrale_event_destroy(f->ctx, f->dead_event));
  MT_OK(metrale_graph_begin_capture(f->ctx, f->s));
  MT_OK(metrale_memset_async(f->ctx, f->p, 1, 16, f->s));
  MT_OK(metrale_graph_end_capture(f->ctx, f->s, &f->g));
  MT_OK(metrale_graph_begin_capture(f->ctx, f->s));
  MT_OK(metrale_graph_end_capture(f->ctx, f->s, &f->dead_graph));
  MT_OK(metrale_graph_destroy(f->ctx, f->dead_graph));
  MT_OK(metrale_stream_synchronize(f->ctx, f->s));
  if (mt_is_host(f->ctx)) {
    static const size_t no_params[1] = {0};
    MT_OK(metrale_module_register_host_params(f->ctx, "bad_input_mod", "noop", noop_kernel, NULL,
                                              no_params, 0));
    MT_OK(metrale_kernel_get(f->ctx, "bad_input_mod", "noop", &f->k));
  } else {
    mt_load_kernels(f->ctx);
    f->k = mt_kernel(f->ctx, "empty_kernel");
  }
  /* A context created after the live one and destroyed: its address is not
   * reused by anything this suite makes later. */
  metrale_context_t* dead = mt_open(NULL);
  mt_close(dead);
  f->bad = dead;
}

static void fx_close(fx_t* f) {
  MT_OK(metrale_graph_destroy(f->ctx, f->g));
  MT_OK(metrale_event_destroy(f->ctx, f->e));
  MT_OK(metrale_event_destroy(f->ctx, f->e2));
  MT_OK(metrale_event_destroy(f->ctx, f->unrecorded));
  MT_OK(metrale_event_destroy(f->ctx, f->no_timing));
  MT_OK(metrale_stream_destroy(f->ctx, f->s));
  MT_OK(metrale_host_free_pinned(f->ctx, f->pinned));
  MT_OK(metrale_free_arena(f->ctx, f->arena));
  MT_OK(metrale_free(f->ctx, f->p));
  mt_close(f->ctx);
}

/* Runs every row; returns how many went wrong, each printed. */
static int run_rows(fx_t* f, const row_t* rows, size_t n, metrale_status_t alt) {
  int wrong = 0;
  for (size_t i = 0; i < n; ++i) {
    mt_ledger_t before = mt_ledger(f->ctx);
    metrale_status_t got = rows[i].fn(f);
    const char* msg = metrale_last_error_message();
    int status_ok = got == rows[i].want || (alt != METRALE_OK && got == alt);
    int msg_ok = msg != NULL && msg[0] != '\0';
    mt_ledger_t after = mt_ledger(f->ctx);
    int ledger_ok = after.count == before.count && after.bytes == before.bytes;
    if (!status_ok || !msg_ok || !ledger_ok) {
      print_message("  row %-34s got %s (want %s)%s%s\n", rows[i].name, metrale_status_name(got),
                    metrale_status_name(rows[i].want), msg_ok ? "" : ", empty message",
                    ledger_ok ? "" : ", ledger changed");
      ++wrong;
      /* Undo what a wrongly accepted call made, so later rows see the same state. */
      if (got == METRALE_OK && !ledger_ok) metrale_sweep_unreleased(f->ctx, NULL);
    }
    /* Leftover handles a wrongly accepted call made stay owned by ctx. */
  }
  return wrong;
}

#define ROWS(r) (r), sizeof(r) / sizeof((r)[0])

static void null_context(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  f.bad = NULL;
  int wrong = run_rows(&f, ROWS(context_rows), METRALE_OK);
  /* The functions that answer something other than a status. */
  assert_int_equal(metrale_has_module(NULL, "m"), 0);
  assert_true(metrale_last_error_message()[0] != '\0');
  assert_null(metrale_default_stream(NULL));
  assert_int_equal(metrale_stream_is_capturing(NULL, f.s), 1);
  assert_int_equal(metrale_context_backend(NULL), METRALE_BACKEND_AUTO);
  MT_OK(metrale_context_destroy(NULL));
  fx_close(&f);
  assert_int_equal(wrong, 0);
}

static void destroyed_context(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  /* INVALID_ARGUMENT, or NOT_FOUND: the header names neither for a handle
   * that is no longer valid; both say "unknown". */
  int wrong = run_rows(&f, ROWS(context_rows), NF);
  assert_int_equal(metrale_has_module(f.bad, "m"), 0);
  assert_null(metrale_default_stream(f.bad));
  assert_int_equal(metrale_stream_is_capturing(f.bad, f.s), 1);
  assert_int_equal(metrale_context_backend(f.bad), METRALE_BACKEND_AUTO);
  metrale_status_t again = metrale_context_destroy(f.bad);
  if (again != INV && again != NF) {
    print_message("  row context_destroy_twice got %s\n", metrale_status_name(again));
    ++wrong;
  }
  fx_close(&f);
  assert_int_equal(wrong, 0);
}

static void null_arguments(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  int wrong = run_rows(&f, ROWS(null_rows), METRALE_OK);
  /* Capture must be active for end_capture to look at its out-parameter. */
  MT_OK(metrale_graph_begin_capture(f.ctx, f.s));
  metrale_status_t s = metrale_graph_end_capture(f.ctx, f.s, NULL);
  MT_OK(metrale_graph_abort_capture(f.ctx, f.s));
  if (s != INV) {
    print_message("  row graph_end_capture_null_out got %s\n", metrale_status_name(s));
    ++wrong;
  }
  if (mt_is_host(f.ctx)) {
    s = metrale_module_register_host(f.ctx, "m3", "f", NULL, NULL);
    if (s != INV) {
      print_message("  row register_host_null_fn got %s\n", metrale_status_name(s));
      ++wrong;
    }
    s = metrale_module_register_host_params(f.ctx, "m3", "f", noop_kernel, NULL, NULL, 2);
    if (s != INV) {
      print_message("  row register_host_params_null_sizes got %s\n", metrale_status_name(s));
      ++wrong;
    }
    s = metrale_module_register_host(f.ctx, "bad_input_mod", "noop", noop_kernel, NULL);
    if (s != INV) {
      print_message("  row register_host_name_taken got %s\n", metrale_status_name(s));
      ++wrong;
    }
  }
  assert_int_equal(metrale_has_module(f.ctx, NULL), 0);
  assert_true(metrale_last_error_message()[0] != '\0');
  fx_close(&f);
  assert_int_equal(wrong, 0);
}

static void bad_values(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  int wrong = run_rows(&f, ROWS(value_rows), METRALE_OK);
  if (mt_is_host(f.ctx)) {
    wrong += run_rows(&f, ROWS(host_value_rows), METRALE_OK);
  } else {
    metrale_status_t s = metrale_module_register_host(f.ctx, "m4", "f", noop_kernel, NULL);
    if (s != METRALE_ERROR_UNSUPPORTED) {
      print_message("  row register_host_on_cuda got %s\n", metrale_status_name(s));
      ++wrong;
    }
  }
  fx_close(&f);
  assert_int_equal(wrong, 0);
}

/* The functions without a context: out-of-enum values, NULL arguments. */
static void context_free_functions(void** state) {
  (void)state;
  MT_OK(metrale_version(NULL, NULL, NULL));
  int major = -1;
  MT_OK(metrale_version(&major, NULL, NULL));
  assert_int_equal(major, METRALE_VERSION_MAJOR);
  MT_OK(metrale_log_set_callback(NULL, NULL));
  int bits[] = {-1, 14, 43, 1 << 30};
  for (size_t i = 0; i < sizeof bits / sizeof bits[0]; ++i) {
    metrale_status_t bogus;
    memcpy(&bogus, &bits[i], sizeof bogus);
    assert_string_equal(metrale_status_name(bogus), "METRALE_UNKNOWN_STATUS");
    metrale_log_level_t level;
    memcpy(&level, &bits[i], sizeof level);
    MT_STATUS(metrale_log_set_level(level), INV);
  }
  assert_non_null(metrale_last_error_message());
  assert_string_equal(metrale_status_name(METRALE_ERROR_INTERNAL), "METRALE_ERROR_INTERNAL");
}

/* metrale_context_create refuses bad options and malformed environment
 * variables, leaving *out alone. */
static void context_create_refuses_bad_options(void** state) {
  (void)state;
  metrale_context_t* sentinel = (metrale_context_t*)(uintptr_t)0x5151;
  metrale_context_t* out = sentinel;
  metrale_context_options_t o = mt_options();
  o.struct_size = 3;
  MT_STATUS(metrale_context_create(&o, &out), INV);
  o = mt_options();
  int bogus_backend = 7;
  memcpy(&o.backend, &bogus_backend, sizeof o.backend);
  MT_STATUS(metrale_context_create(&o, &out), INV);
  o = mt_options();
  o.device = -1;
  MT_STATUS(metrale_context_create(&o, &out), INV);
  static const char* const bad_env[][2] = {
      {"METRALE_BACKEND", "gpu"},     {"METRALE_REDZONE", "lots"}, {"METRALE_CHECKED", "2"},
      {"METRALE_DEVICE", "-3"},       {"METRALE_LOG", "loud"},     {"METRALE_DEBUG_SYNC", "yes"},
      {"METRALE_REDZONE_MIN_IDX", "x"},
  };
  for (size_t i = 0; i < sizeof bad_env / sizeof bad_env[0]; ++i) {
    const char* old = getenv(bad_env[i][0]);
    char* saved = old ? strdup(old) : NULL;
    setenv(bad_env[i][0], bad_env[i][1], 1);
    metrale_status_t s = metrale_context_create(NULL, &out);
    if (saved) {
      setenv(bad_env[i][0], saved, 1);
      free(saved);
    } else {
      unsetenv(bad_env[i][0]);
    }
    if (s != INV) print_message("  %s=%s\n", bad_env[i][0], bad_env[i][1]);
    MT_STATUS(s, INV);
  }
  assert_ptr_equal(out, sentinel);
}

static void destroyed_handles(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  int wrong = run_rows(&f, ROWS(handle_rows), NF);
  fx_close(&f);
  assert_int_equal(wrong, 0);
}

static void the_context_still_works_afterwards(void** state) {
  (void)state;
  fx_t f;
  fx_open(&f);
  run_rows(&f, ROWS(null_rows), METRALE_OK);
  run_rows(&f, ROWS(value_rows), METRALE_OK);
  MT_OK(metrale_context_fault(f.ctx));
  unsigned char src[64], back[64];
  for (int i = 0; i < 64; ++i) src[i] = (unsigned char)(i + 100);
  MT_OK(metrale_copy_h2d(f.ctx, src, 64, f.p));
  MT_OK(metrale_copy_d2h(f.ctx, f.p, back, 64));
  assert_memory_equal(src, back, 64);
  mt_ledger_t l = mt_ledger(f.ctx);
  assert_int_equal(l.count, 1);
  assert_int_equal(l.bytes, 1024);
  fx_close(&f);
}

/* A red-zone scan that finds a dirty pad while the default stream captures
 * must refuse without recording its own read-back into the caller's graph
 * (found by the fuzzer: the replay wrote into the scan's freed buffer). */
static void redzone_scan_while_the_default_stream_captures(void** state) {
  (void)state;
  metrale_context_options_t o = mt_options();
  o.redzone_bytes = 64;
  metrale_context_t* ctx = mt_open(&o);
  mt_load_kernels(ctx);
  metrale_devptr_t p = 0;
  MT_OK(metrale_alloc(ctx, 256, &p));
  MT_OK(mt_overflow_write(ctx, p, 256, 8, 0x11));
  MT_OK(metrale_stream_synchronize(ctx, NULL));
  MT_OK(metrale_graph_begin_capture(ctx, NULL));
  size_t n = 0;
  metrale_status_t s = metrale_redzone_scan(ctx, NULL, 0, &n);
  if (mt_is_host(ctx)) {
    MT_STATUS(s, METRALE_ERROR_CAPTURE);
    metrale_graph_t* g = NULL;
    MT_OK(metrale_graph_end_capture(ctx, NULL, &g));
    MT_OK(metrale_graph_launch(ctx, g, NULL)); /* nothing of the scan's in it */
    MT_OK(metrale_stream_synchronize(ctx, NULL));
    MT_OK(metrale_graph_destroy(ctx, g));
  } else {
    /* On a GPU the driver may also object to the scan's own stream work
     * during a thread-local capture: any refusal will do, then abort. */
    if (s == METRALE_OK) fail_msg("redzone_scan during a capture returned OK with a dirty pad");
    MT_OK(metrale_graph_abort_capture(ctx, NULL));
  }
  MT_STATUS(metrale_redzone_scan(ctx, NULL, 0, &n), METRALE_ERROR_REDZONE_CORRUPTED);
  assert_int_equal(n, 1);
  MT_OK(metrale_free(ctx, p));
  mt_close(ctx);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(null_context),
      cmocka_unit_test(destroyed_context),
      cmocka_unit_test(null_arguments),
      cmocka_unit_test(bad_values),
      cmocka_unit_test(destroyed_handles),
      cmocka_unit_test(the_context_still_works_afterwards),
      cmocka_unit_test(context_free_functions),
      cmocka_unit_test(context_create_refuses_bad_options),
      cmocka_unit_test(redzone_scan_while_the_default_stream_captures),
  };
  return MT_RUN(tests);
}
