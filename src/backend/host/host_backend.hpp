// The host backend: the Backend interface on host memory, for machines with
// no GPU. Device memory is host memory (a device pointer is the host
// address), streams run their work at once in the caller's thread, events
// complete at once, graphs are recorded op lists and kernels are registered
// C functions. Every method is thread-safe. The methods are defined in one
// file per concern: host_memory.cpp, host_copies.cpp, host_streams.cpp,
// host_graphs.cpp, host_kernels.cpp, host_device.cpp, host_backend.cpp.
#pragma once

#include <atomic>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "backend/host/fault_latch.hpp"
#include "backend/host/handle_table.hpp"
#include "backend/host/kernel_registry.hpp"
#include "backend/host/region_map.hpp"
#include "backend/host/stream_objects.hpp"

namespace metrale::backend::host {

class HostBackend final : public Backend {
 public:
  // ordinal: the simulated device (METRALE_HOST_DEVICES, host_peers.cpp).
  explicit HostBackend(int ordinal = 0);
  ~HostBackend() override;

  metrale_backend_t kind() const override { return METRALE_BACKEND_HOST; }
  DeviceInfo device_info() override;
  void mem_info(size_t* free_bytes, size_t* total_bytes) override;
  void bind_thread() override {}

  DevPtr mem_alloc(size_t bytes, size_t* reserved) override;
  DevPtr mem_alloc_managed(size_t bytes, size_t* reserved) override;
  void mem_free(DevPtr ptr) override;
  void* host_alloc_pinned(size_t bytes) override;
  void host_free_pinned(void* ptr) override;
  void host_register(void* ptr, size_t bytes) override;
  void host_unregister(void* ptr) override;
  DevPtr host_device_pointer(void* ptr) override;
  bool host_range_pinned(const void* ptr, size_t bytes) override;
  bool device_range_known(DevPtr ptr, size_t bytes) override;

  void copy_h2d_async(DevPtr dst, const void* src, size_t bytes, StreamHandle s) override;
  void copy_h2d_snapshot_async(DevPtr dst, const void* src, size_t bytes,
                               StreamHandle s) override;
  void copy_d2h_async(void* dst, DevPtr src, size_t bytes, StreamHandle s) override;
  void copy_d2d_async(DevPtr dst, DevPtr src, size_t bytes, StreamHandle s) override;
  void copy_2d_async(DevPtr dst, size_t dst_pitch, DevPtr src, size_t src_pitch, size_t width_bytes,
                     size_t height, StreamHandle s) override;
  void memset_async(DevPtr dst, uint8_t value, size_t bytes, StreamHandle s) override;

  void pattern_fill(const Range* ranges, size_t n, uint8_t byte) override;
  void pattern_count(const Range* ranges, size_t n, uint8_t byte, uint32_t* mismatches) override;
  // Keeps its own copy of the table between calls and takes only the changed
  // slots, as cuda's device table does, so the suites on the host backend
  // catch a change the caller failed to list (host_pad_table.cpp).
  void pattern_count_table(const Range* table, size_t n, const uint32_t* changed,
                           size_t nchanged, bool whole, uint8_t byte,
                           std::vector<PadHit>* hits) override;
  // Runs at once on s, in the caller's thread, as all host stream work does
  // (host_pad_check.cpp); the results wait for pad_check_take.
  uint64_t pad_check_async(const Range* ranges, size_t n, uint8_t byte, StreamHandle s) override;
  bool pad_check_take(uint64_t t, bool wait, PadCheck* out) override;

  StreamHandle stream_create() override;
  StreamHandle stream_wrap(uint64_t native, bool* owned) override;
  void stream_destroy(StreamHandle s) override;
  void stream_synchronize(StreamHandle s) override;
  bool stream_is_capturing(StreamHandle s) override;
  bool in_stream_work(StreamHandle s) override;
  EventHandle event_create(bool timing) override;
  void event_destroy(EventHandle e) override;
  void event_record(EventHandle e, StreamHandle s) override;
  void event_synchronize(EventHandle e) override;
  bool event_query(EventHandle e) override;
  float event_elapsed_ms(EventHandle start, EventHandle end) override;
  void stream_wait_event(StreamHandle s, EventHandle e) override;

  void capture_begin(StreamHandle s) override;
  GraphHandle capture_end(StreamHandle s) override;
  void capture_abort(StreamHandle s) override;
  void graph_launch(GraphHandle g, StreamHandle s) override;
  void graph_destroy(GraphHandle g) override;

  ModuleHandle module_load(const void* image, size_t size) override;
  void module_unload(ModuleHandle m) override;
  FuncHandle module_function(ModuleHandle m, const char* name) override;
  ModuleHandle host_module_add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn,
                               void* user, const ParamInfo* layout, size_t nparams) override;
  bool function_params(FuncHandle f, std::vector<ParamInfo>* out) override;
  void launch(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes, StreamHandle s,
              void** params) override;
  void launch_packed(FuncHandle f, Dim3 grid, Dim3 block, uint32_t shared_bytes, StreamHandle s,
                     const void* args, size_t args_bytes) override;

  std::string probe_fault() override { return fault_.message(); }

  // Simulated devices and peers (host_peers.cpp): every pair of devices has
  // a peer path unless METRALE_TEST_HOST_NO_PEER=1 was set at creation.
  std::string peer_refusal(Backend& peer) override;
  void peer_access_enable(Backend& peer) override;
  void copy_peer_async(DevPtr dst, Backend& dst_owner, DevPtr src, size_t bytes,
                       StreamHandle s) override;

 private:
  DevPtr allocate_owned(size_t bytes, size_t* reserved, RegionKind kind);
  // Frees a block (already out of the region map) once no op that runs on
  // a stream of this backend now (a host kernel on another thread) is
  // still running (host_memory.cpp).
  struct PendingFree;
  void free_after_running_work(PendingFree* pending) noexcept;
  // A live stream that may take work: not lost, handle valid.
  std::shared_ptr<HostStream> usable_stream(StreamHandle s);

  const size_t physical_memory_;
  const int ordinal_;
  // Test hook METRALE_TEST_HOST_NO_PEER=1: this device has no peer path.
  bool no_peer_ = false;
  bool refill_counted_ = false;  // METRALE_TEST_HOST_REFILL_COUNTED
  // Test hook METRALE_TEST_HOST_FAIL_FREE=<n>: the n-th mem_free call of
  // this backend fails with DRIVER and frees nothing (0: never).
  uint64_t fail_free_at_ = 0;
  std::atomic<uint64_t> free_calls_{0};
  // Test hook METRALE_TEST_HOST_FAIL_PINNED=<n>: the n-th host_alloc_pinned
  // call of this backend fails with OUT_OF_MEMORY (0: never).
  uint64_t fail_pinned_at_ = 0;
  std::atomic<uint64_t> pinned_calls_{0};
  HandleCounter handles_;
  FaultLatch fault_;
  RegionMap regions_;
  HandleTable<HostStream> streams_{"stream", &handles_};
  HandleTable<HostEvent> events_{"event", &handles_};
  HandleTable<HostGraph> graphs_{"graph", &handles_};
  KernelRegistry kernels_{&handles_};
  // pattern_count_table's copy; valid only after a call that returned.
  std::vector<Range> pad_table_;
  bool pad_table_valid_ = false;
  // pad_check_async's results by ticket, until taken.
  std::mutex pad_checks_mutex_;
  std::unordered_map<uint64_t, std::vector<PadCheck>> pad_checks_;
  uint64_t next_pad_check_ = 0;  // under pad_checks_mutex_
};

}  // namespace metrale::backend::host
