// One host-kernel launch, prepared at enqueue so that it can run now or, when
// captured, at every replay with the values it was given.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "backend/host/fault_latch.hpp"
#include "backend/host/kernel_registry.hpp"
#include "backend/host/param_bytes.hpp"

namespace metrale::backend::host {

struct KernelCall {
  std::shared_ptr<const HostFunction> function;
  metrale_dim3_t grid, block;
  uint32_t shared_bytes;
  // Known sizes: the parameter values laid out as function->layout says,
  // aligned for its most aligned parameter. Unknown sizes, packed launch:
  // the caller's buffer, 8-aligned.
  ParamBytes values;
  // Unknown sizes, plain launch: the caller's array, passed as it is.
  void** caller_params = nullptr;
  bool packed = false;

  // Calls the kernel. A kernel returning CONTEXT_LOST latches `fault` and
  // throws CONTEXT_LOST; any other non-OK status is thrown as it is.
  void run(FaultLatch& fault) const;
};

// Copies of the parameter values, for a kernel with known sizes.
KernelCall prepare_launch(std::shared_ptr<const HostFunction> function, void** params);
// A copy of the packed buffer, checked against the known layout.
KernelCall prepare_packed(std::shared_ptr<const HostFunction> function, const void* args,
                          size_t args_bytes);

}  // namespace metrale::backend::host
