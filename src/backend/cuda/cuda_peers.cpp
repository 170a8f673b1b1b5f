// Several devices on the cuda backend: the device count, peer access
// between the primary contexts of two devices, and peer copies. Nothing here
// touches NVLink multicast (cuMulticast*): a program that uses it can put a
// host's shared GPUs out of service.
#include <string>

#include "backend/cuda/cuda_backend.hpp"

namespace metrale::backend {

int cuda_device_count() {
  const cuda_impl::DriverApi& api = cuda_impl::driver();  // NO_DRIVER / NO_DEVICE
  int count = 0;
  CUresult rc = api.deviceGetCount(&count);
  if (rc != CUDA_SUCCESS) {
    fail(METRALE_ERROR_DRIVER, cuda_impl::failure_message(&api, "cuDeviceGetCount", rc),
         static_cast<int>(rc));
  }
  return count;
}

namespace cuda_impl {

std::string CudaBackend::peer_refusal(Backend& peer) {
  auto* other = dynamic_cast<CudaBackend*>(&peer);
  if (other == nullptr) {
    return "CUDA device " + std::to_string(ordinal_) +
           " cannot reach the memory of a host-backend context: peers must be of one backend";
  }
  if (other->device_ == device_) return std::string();
  int can = 0;
  check(api_.deviceCanAccessPeer(&can, device_, other->device_), "cuDeviceCanAccessPeer");
  if (can != 0) return std::string();
  return "the driver reports no peer path from CUDA device " + std::to_string(ordinal_) +
         " to CUDA device " + std::to_string(other->ordinal_) +
         " (cuDeviceCanAccessPeer answered 0: the GPUs share no NVLink or PCIe peer-to-peer "
         "path, or the platform disables it, e.g. an IOMMU or a virtual machine); peer copies "
         "still work, staged by the driver";
}

void CudaBackend::peer_access_enable(Backend& peer) {
  std::string why = peer_refusal(peer);
  if (!why.empty()) fail(METRALE_ERROR_UNSUPPORTED, why);
  auto& other = static_cast<CudaBackend&>(peer);
  if (other.device_ == device_) return;  // a device reaches its own memory
  make_current();
  CUresult rc = api_.ctxEnablePeerAccess(other.context_, 0);
  if (rc == CUDA_SUCCESS || rc == CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED) return;
  if (rc == CUDA_ERROR_TOO_MANY_PEERS || rc == CUDA_ERROR_PEER_ACCESS_UNSUPPORTED) {
    fail(METRALE_ERROR_UNSUPPORTED,
         failure_message(&api_, "cuCtxEnablePeerAccess", rc,
                         "CUDA device " + std::to_string(ordinal_) + " to device " +
                             std::to_string(other.ordinal_) +
                             (rc == CUDA_ERROR_TOO_MANY_PEERS
                                  ? ": this device already has the most peers the hardware allows"
                                  : ": the driver refuses peer access between these devices")),
         static_cast<int>(rc));
  }
  check(rc, "cuCtxEnablePeerAccess");
}

// One primary context per device: contexts of this library on the same
// device share it, and their copy is a plain device-to-device copy.
void CudaBackend::copy_peer_async(DevPtr dst, Backend& dst_owner, DevPtr src, size_t bytes,
                                  StreamHandle s) {
  auto* other = dynamic_cast<CudaBackend*>(&dst_owner);
  if (other == nullptr) {
    fail(METRALE_ERROR_UNSUPPORTED,
         "copy_peer from a CUDA device to a host-backend context: peers must be of one backend");
  }
  make_current();
  CUstream stream = reinterpret_cast<CUstream>(s);
  if (other->context_ == context_) {
    check(api_.memcpyDtoDAsync(static_cast<CUdeviceptr>(dst), static_cast<CUdeviceptr>(src),
                               bytes, stream),
          "cuMemcpyDtoDAsync_v2");
    return;
  }
  check(api_.memcpyPeerAsync(static_cast<CUdeviceptr>(dst), other->context_,
                             static_cast<CUdeviceptr>(src), context_, bytes, stream),
        "cuMemcpyPeerAsync");
}

}  // namespace cuda_impl
}  // namespace metrale::backend
