#include "backend/host/kernel_call.hpp"

#include <cstring>
#include <string>

#include "backend/error.hpp"

namespace metrale::backend::host {

namespace {

// The library's own status names; the backend layer cannot call the api's.
const char* status_name(int status) {
  switch (status) {
    case METRALE_OK:
      return "METRALE_OK";
    case METRALE_ERROR_INVALID_ARGUMENT:
      return "METRALE_ERROR_INVALID_ARGUMENT";
    case METRALE_ERROR_OUT_OF_MEMORY:
      return "METRALE_ERROR_OUT_OF_MEMORY";
    case METRALE_ERROR_NOT_FOUND:
      return "METRALE_ERROR_NOT_FOUND";
    case METRALE_ERROR_NO_DRIVER:
      return "METRALE_ERROR_NO_DRIVER";
    case METRALE_ERROR_NO_DEVICE:
      return "METRALE_ERROR_NO_DEVICE";
    case METRALE_ERROR_UNSUPPORTED:
      return "METRALE_ERROR_UNSUPPORTED";
    case METRALE_ERROR_CONTEXT_LOST:
      return "METRALE_ERROR_CONTEXT_LOST";
    case METRALE_ERROR_REDZONE_CORRUPTED:
      return "METRALE_ERROR_REDZONE_CORRUPTED";
    case METRALE_ERROR_OUT_OF_BOUNDS:
      return "METRALE_ERROR_OUT_OF_BOUNDS";
    case METRALE_ERROR_CAPTURE:
      return "METRALE_ERROR_CAPTURE";
    case METRALE_ERROR_BUFFER_TOO_SMALL:
      return "METRALE_ERROR_BUFFER_TOO_SMALL";
    case METRALE_ERROR_DRIVER:
      return "METRALE_ERROR_DRIVER";
    case METRALE_ERROR_INTERNAL:
      return "METRALE_ERROR_INTERNAL";
  }
  return nullptr;
}

}  // namespace

KernelCall prepare_launch(std::shared_ptr<const HostFunction> function, void** params) {
  KernelCall call;
  if (!function->sizes_known) {
    call.caller_params = params;
  } else {
    const std::vector<ParamInfo>& layout = function->layout;
    if (!layout.empty() && params == nullptr) {
      fail(METRALE_ERROR_INVALID_ARGUMENT, "host kernel " + function->label + " takes " +
                                               std::to_string(layout.size()) +
                                               " parameters but params is NULL");
    }
    call.values = ParamBytes(function->args_bytes, function->storage_align);
    unsigned char* base = call.values.data();
    for (size_t i = 0; i < layout.size(); ++i) {
      if (params[i] == nullptr) {
        fail(METRALE_ERROR_INVALID_ARGUMENT,
             "host kernel " + function->label + ": params[" + std::to_string(i) + "] is NULL");
      }
      std::memcpy(base + layout[i].offset, params[i], layout[i].size);
    }
  }
  call.function = std::move(function);
  return call;
}

KernelCall prepare_packed(std::shared_ptr<const HostFunction> function, const void* args,
                          size_t args_bytes) {
  if (function->sizes_known && args_bytes != function->args_bytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host kernel " + function->label + ": packed arguments are " + std::to_string(args_bytes) +
             " bytes but its parameters take " + std::to_string(function->args_bytes) + " bytes");
  }
  if (args == nullptr && args_bytes != 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host kernel " + function->label +
                                             ": args is NULL but args_bytes is " +
                                             std::to_string(args_bytes));
  }
  KernelCall call;
  call.packed = true;
  call.values = ParamBytes(args_bytes, function->storage_align);
  if (args_bytes != 0) std::memcpy(call.values.data(), args, args_bytes);
  call.function = std::move(function);
  return call;
}

void KernelCall::run(FaultLatch& fault) const {
  const HostFunction& f = *function;
  metrale_host_kernel_call_t call{};
  call.grid = grid;
  call.block = block;
  call.shared_bytes = shared_bytes;

  // Each run gets its own copy of the values, as each GPU launch does: a
  // kernel writing to its parameters must not change the next replay's.
  ParamBytes copy;
  std::vector<void*> pointers;
  if (f.sizes_known) {
    copy = values;
    unsigned char* base = copy.data();
    pointers.resize(f.layout.size() + 1);  // never empty: params is never NULL
    for (size_t i = 0; i < f.layout.size(); ++i) pointers[i] = base + f.layout[i].offset;
    call.params = pointers.data();
    call.args = base;
    call.args_bytes = copy.size();
  } else if (packed) {
    call.params = nullptr;
    call.args = values.size() != 0 ? values.data() : nullptr;
    call.args_bytes = values.size();
  } else {
    call.params = caller_params;
  }

  // The kernel is the caller's code and may return any int: read the bits,
  // since loading an out-of-range value through the enum type is undefined.
  const metrale_status_t returned = f.fn(&call, f.user);
  int status;
  std::memcpy(&status, &returned, sizeof status);
  if (status == METRALE_OK) return;
  if (status == METRALE_ERROR_CONTEXT_LOST) {
    std::string message = "host kernel " + f.label + " reported a sticky device fault";
    fault.latch(message);
    fail(METRALE_ERROR_CONTEXT_LOST, message);
  }
  const char* name = status_name(status);
  if (name == nullptr) {
    fail(METRALE_ERROR_DRIVER,
         "host kernel " + f.label + " returned an unknown status " +
             std::to_string(static_cast<int>(status)),
         static_cast<int>(status));
  }
  fail(static_cast<metrale_status_t>(status), "host kernel " + f.label + " returned " + name);
}

}  // namespace metrale::backend::host
