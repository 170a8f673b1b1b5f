// Device identity and memory: the host machine stands in for the GPU.
#include <thread>

#include "backend/host/host_backend.hpp"
#include "backend/host/system_info.hpp"

namespace metrale::backend::host {

DeviceInfo HostBackend::device_info() {
  DeviceInfo info;
  const std::string model = cpu_model_name();
  info.name = model.empty() ? "host" : "host (" + model + ")";
  info.compute_major = 0;
  info.compute_minor = 0;
  const unsigned cpus = std::thread::hardware_concurrency();
  info.sm_count = cpus == 0 ? 1 : static_cast<int>(cpus);
  info.total_memory = physical_memory_;
  info.ordinal = ordinal_;
  return info;
}

void HostBackend::mem_info(size_t* free_bytes, size_t* total_bytes) {
  fault_.throw_if_lost();
  if (free_bytes != nullptr) *free_bytes = available_memory_bytes();
  if (total_bytes != nullptr) *total_bytes = physical_memory_;
}

}  // namespace metrale::backend::host
