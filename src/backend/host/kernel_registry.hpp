// Host "modules": named C functions standing in for GPU kernels, grouped
// under a module handle, with their parameter layout when the registrant
// gave the parameter sizes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <shared_mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "backend/backend.hpp"
#include "backend/host/handle_table.hpp"

namespace metrale::backend::host {

struct HostFunction {
  std::string label;  // "module#N::name", for messages
  metrale_host_kernel_fn fn;
  void* user;
  bool sizes_known;
  std::vector<ParamInfo> layout;  // when sizes_known
  size_t args_bytes;              // end of the last parameter; 0 when none
};

// Each parameter aligned to the largest power of two dividing its size,
// capped at 8 (as a C compiler lays out a struct of them); offsets
// accumulate. *total gets the end of the last parameter.
std::vector<ParamInfo> param_layout(const size_t* sizes, size_t n, size_t* total);

class KernelRegistry {
 public:
  explicit KernelRegistry(HandleCounter* counter) : counter_(counter) {}

  // Adds fn as `name` to module m (a new module when m is 0); returns the
  // module. INVALID_ARGUMENT for a bad argument, an unknown module or a
  // name already in the module.
  ModuleHandle add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn, void* user,
                   const size_t* param_sizes, size_t nparams);
  // INVALID_ARGUMENT for an unknown module.
  void unload(ModuleHandle m);
  // NOT_FOUND when the module has no such function.
  FuncHandle function(ModuleHandle m, const char* name) const;
  // INVALID_ARGUMENT for an unknown handle, NOT_FOUND for one whose module
  // was unloaded.
  std::shared_ptr<const HostFunction> get(FuncHandle f) const;

 private:
  struct Module {
    uint64_t number;
    std::unordered_map<std::string, FuncHandle> functions;
  };

  HandleCounter* counter_;
  mutable std::shared_mutex mutex_;
  uint64_t modules_made_ = 0;  // under mutex_
  std::unordered_map<ModuleHandle, Module> modules_;
  std::unordered_map<FuncHandle, std::shared_ptr<const HostFunction>> functions_;
  std::unordered_set<FuncHandle> unloaded_;
};

}  // namespace metrale::backend::host
