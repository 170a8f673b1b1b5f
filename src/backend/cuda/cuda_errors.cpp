#include "backend/cuda/cuda_errors.hpp"

#include "backend/cuda/driver_api.hpp"

namespace metrale::backend::cuda_impl {
namespace {

// Names for the codes this library reasons about, for when the driver cannot
// name them itself (the stub library answers every call with 34).
const char* builtin_name(CUresult rc) {
  switch (rc) {
    case CUDA_ERROR_INVALID_VALUE: return "CUDA_ERROR_INVALID_VALUE";
    case CUDA_ERROR_OUT_OF_MEMORY: return "CUDA_ERROR_OUT_OF_MEMORY";
    case CUDA_ERROR_NOT_INITIALIZED: return "CUDA_ERROR_NOT_INITIALIZED";
    case CUDA_ERROR_DEINITIALIZED: return "CUDA_ERROR_DEINITIALIZED";
    case CUDA_ERROR_STUB_LIBRARY: return "CUDA_ERROR_STUB_LIBRARY";
    case CUDA_ERROR_NO_DEVICE: return "CUDA_ERROR_NO_DEVICE";
    case CUDA_ERROR_INVALID_DEVICE: return "CUDA_ERROR_INVALID_DEVICE";
    case CUDA_ERROR_INVALID_CONTEXT: return "CUDA_ERROR_INVALID_CONTEXT";
    case CUDA_ERROR_INVALID_HANDLE: return "CUDA_ERROR_INVALID_HANDLE";
    case CUDA_ERROR_NOT_FOUND: return "CUDA_ERROR_NOT_FOUND";
    case CUDA_ERROR_ILLEGAL_ADDRESS: return "CUDA_ERROR_ILLEGAL_ADDRESS";
    case CUDA_ERROR_CONTEXT_IS_DESTROYED: return "CUDA_ERROR_CONTEXT_IS_DESTROYED";
    case CUDA_ERROR_LAUNCH_FAILED: return "CUDA_ERROR_LAUNCH_FAILED";
    case CUDA_ERROR_NOT_SUPPORTED: return "CUDA_ERROR_NOT_SUPPORTED";
    case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH: return "CUDA_ERROR_SYSTEM_DRIVER_MISMATCH";
    case CUDA_ERROR_UNKNOWN: return "CUDA_ERROR_UNKNOWN";
    default: return nullptr;
  }
}

}  // namespace

metrale_status_t status_for(CUresult rc) {
  if (rc == CUDA_SUCCESS) return METRALE_OK;
  if (is_sticky(rc)) return METRALE_ERROR_CONTEXT_LOST;
  switch (rc) {
    case CUDA_ERROR_OUT_OF_MEMORY:
      return METRALE_ERROR_OUT_OF_MEMORY;
    case CUDA_ERROR_INVALID_VALUE:
    case CUDA_ERROR_INVALID_HANDLE:
    // Registering a range twice or unregistering one never registered is
    // the caller's mistake, not the driver's.
    case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED:
      return METRALE_ERROR_INVALID_ARGUMENT;
    case CUDA_ERROR_NOT_FOUND:
      return METRALE_ERROR_NOT_FOUND;
    case CUDA_ERROR_NOT_SUPPORTED:
      return METRALE_ERROR_UNSUPPORTED;
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED:
    case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE:
    case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED:
    case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT:
    case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD:
      return METRALE_ERROR_CAPTURE;
    default:
      return METRALE_ERROR_DRIVER;
  }
}

bool is_sticky(CUresult rc) {
  // cuda.h documents each of these as leaving the context (or the process)
  // unusable: every later call returns the same error.
  switch (rc) {
    case CUDA_ERROR_ILLEGAL_ADDRESS:          // 700
    case CUDA_ERROR_LAUNCH_TIMEOUT:           // 702
    case CUDA_ERROR_ASSERT:                   // 710
    case CUDA_ERROR_HARDWARE_STACK_ERROR:     // 714
    case CUDA_ERROR_ILLEGAL_INSTRUCTION:      // 715
    case CUDA_ERROR_MISALIGNED_ADDRESS:       // 716
    case CUDA_ERROR_INVALID_ADDRESS_SPACE:    // 717
    case CUDA_ERROR_INVALID_PC:               // 718
    case CUDA_ERROR_LAUNCH_FAILED:            // 719
    case CUDA_ERROR_TENSOR_MEMORY_LEAK:       // 721
    case CUDA_ERROR_CONTAINED:                // 226
    case CUDA_ERROR_EXTERNAL_DEVICE:          // 911
    case CUDA_ERROR_MPS_CLIENT_TERMINATED:    // 810: "the process must be terminated"
    // Not worded as sticky in cuda.h, but hardware errors during execution
    // leave the work (and the context) in an unknown state.
    case CUDA_ERROR_ECC_UNCORRECTABLE:        // 214
    case CUDA_ERROR_NVLINK_UNCORRECTABLE:     // 220
    case CUDA_ERROR_UNKNOWN:                  // 999: what a dying context often says
      return true;
    default:
      return false;
  }
}

bool may_hide_fault(CUresult rc) {
  if (rc == CUDA_SUCCESS || is_sticky(rc)) return false;  // sticky: CONTEXT_LOST already
  // Every other code cuda.h (13.0) defines is about the call itself: a bad
  // argument or launch configuration, a missing symbol, a capture rule, a
  // busy resource. The context is as healthy as before. A code outside this
  // list comes from a newer driver and may be a sticky fault we cannot name.
  switch (rc) {
    case CUDA_ERROR_INVALID_VALUE: case CUDA_ERROR_OUT_OF_MEMORY:
    case CUDA_ERROR_NOT_INITIALIZED: case CUDA_ERROR_DEINITIALIZED:
    case CUDA_ERROR_PROFILER_DISABLED: case CUDA_ERROR_PROFILER_NOT_INITIALIZED:
    case CUDA_ERROR_PROFILER_ALREADY_STARTED: case CUDA_ERROR_PROFILER_ALREADY_STOPPED:
    case CUDA_ERROR_STUB_LIBRARY: case CUDA_ERROR_CALL_REQUIRES_NEWER_DRIVER:
    case CUDA_ERROR_DEVICE_UNAVAILABLE: case CUDA_ERROR_NO_DEVICE:
    case CUDA_ERROR_INVALID_DEVICE: case CUDA_ERROR_DEVICE_NOT_LICENSED:
    case CUDA_ERROR_INVALID_IMAGE: case CUDA_ERROR_INVALID_CONTEXT:
    case CUDA_ERROR_CONTEXT_ALREADY_CURRENT: case CUDA_ERROR_MAP_FAILED:
    case CUDA_ERROR_UNMAP_FAILED: case CUDA_ERROR_ARRAY_IS_MAPPED:
    case CUDA_ERROR_ALREADY_MAPPED: case CUDA_ERROR_NO_BINARY_FOR_GPU:
    case CUDA_ERROR_ALREADY_ACQUIRED: case CUDA_ERROR_NOT_MAPPED:
    case CUDA_ERROR_NOT_MAPPED_AS_ARRAY: case CUDA_ERROR_NOT_MAPPED_AS_POINTER:
    case CUDA_ERROR_UNSUPPORTED_LIMIT: case CUDA_ERROR_CONTEXT_ALREADY_IN_USE:
    case CUDA_ERROR_PEER_ACCESS_UNSUPPORTED: case CUDA_ERROR_INVALID_PTX:
    case CUDA_ERROR_INVALID_GRAPHICS_CONTEXT: case CUDA_ERROR_JIT_COMPILER_NOT_FOUND:
    case CUDA_ERROR_UNSUPPORTED_PTX_VERSION: case CUDA_ERROR_JIT_COMPILATION_DISABLED:
    case CUDA_ERROR_UNSUPPORTED_EXEC_AFFINITY: case CUDA_ERROR_UNSUPPORTED_DEVSIDE_SYNC:
    case CUDA_ERROR_INVALID_SOURCE: case CUDA_ERROR_FILE_NOT_FOUND:
    case CUDA_ERROR_SHARED_OBJECT_SYMBOL_NOT_FOUND: case CUDA_ERROR_SHARED_OBJECT_INIT_FAILED:
    case CUDA_ERROR_OPERATING_SYSTEM: case CUDA_ERROR_INVALID_HANDLE:
    case CUDA_ERROR_ILLEGAL_STATE: case CUDA_ERROR_LOSSY_QUERY:
    case CUDA_ERROR_NOT_FOUND: case CUDA_ERROR_NOT_READY:
    case CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES: case CUDA_ERROR_LAUNCH_INCOMPATIBLE_TEXTURING:
    case CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED: case CUDA_ERROR_PEER_ACCESS_NOT_ENABLED:
    case CUDA_ERROR_PRIMARY_CONTEXT_ACTIVE: case CUDA_ERROR_CONTEXT_IS_DESTROYED:
    case CUDA_ERROR_TOO_MANY_PEERS: case CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED:
    case CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED: case CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE:
    case CUDA_ERROR_NOT_PERMITTED: case CUDA_ERROR_NOT_SUPPORTED:
    case CUDA_ERROR_SYSTEM_NOT_READY: case CUDA_ERROR_SYSTEM_DRIVER_MISMATCH:
    case CUDA_ERROR_COMPAT_NOT_SUPPORTED_ON_DEVICE: case CUDA_ERROR_MPS_CONNECTION_FAILED:
    case CUDA_ERROR_MPS_RPC_FAILURE: case CUDA_ERROR_MPS_SERVER_NOT_READY:
    case CUDA_ERROR_MPS_MAX_CLIENTS_REACHED: case CUDA_ERROR_MPS_MAX_CONNECTIONS_REACHED:
    case CUDA_ERROR_CDP_NOT_SUPPORTED: case CUDA_ERROR_CDP_VERSION_MISMATCH:
    case CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED: case CUDA_ERROR_STREAM_CAPTURE_INVALIDATED:
    case CUDA_ERROR_STREAM_CAPTURE_MERGE: case CUDA_ERROR_STREAM_CAPTURE_UNMATCHED:
    case CUDA_ERROR_STREAM_CAPTURE_UNJOINED: case CUDA_ERROR_STREAM_CAPTURE_ISOLATION:
    case CUDA_ERROR_STREAM_CAPTURE_IMPLICIT: case CUDA_ERROR_CAPTURED_EVENT:
    case CUDA_ERROR_STREAM_CAPTURE_WRONG_THREAD: case CUDA_ERROR_TIMEOUT:
    case CUDA_ERROR_GRAPH_EXEC_UPDATE_FAILURE: case CUDA_ERROR_INVALID_CLUSTER_SIZE:
    case CUDA_ERROR_FUNCTION_NOT_LOADED: case CUDA_ERROR_INVALID_RESOURCE_TYPE:
    case CUDA_ERROR_INVALID_RESOURCE_CONFIGURATION: case CUDA_ERROR_KEY_ROTATION:
      return false;
    default:
      return true;
  }
}

bool is_teardown_noop(CUresult rc) {
  return rc == CUDA_ERROR_DEINITIALIZED || rc == CUDA_ERROR_INVALID_CONTEXT ||
         rc == CUDA_ERROR_CONTEXT_IS_DESTROYED;
}

std::string describe(const DriverApi* api, CUresult rc) {
  const char* name = nullptr;
  const char* text = nullptr;
  if (api != nullptr && api->getErrorName != nullptr &&
      api->getErrorName(rc, &name) != CUDA_SUCCESS)
    name = nullptr;
  if (api != nullptr && api->getErrorString != nullptr &&
      api->getErrorString(rc, &text) != CUDA_SUCCESS)
    text = nullptr;
  if (name == nullptr) name = builtin_name(rc);
  std::string out = name != nullptr ? name : "CUDA_ERROR_UNRECOGNIZED";
  out += " (" + std::to_string(static_cast<int>(rc)) + ")";
  if (text != nullptr) {
    out += ": ";
    out += text;
  }
  return out;
}

std::string failure_message(const DriverApi* api, const char* function, CUresult rc,
                            const std::string& detail) {
  std::string msg = std::string(function) + " failed: " + describe(api, rc);
  if (!detail.empty()) msg += "; " + detail;
  return msg;
}

void throw_failure(const DriverApi* api, const char* function, CUresult rc,
                   const std::string& detail) {
  fail(status_for(rc), failure_message(api, function, rc, detail), static_cast<int>(rc));
}

}  // namespace metrale::backend::cuda_impl
