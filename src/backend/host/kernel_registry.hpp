// Host "modules": named C functions standing in for GPU kernels, grouped
// under a module handle, with their parameter layout when the registrant
// gave it (laid out by core with the packing rule).
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
  // What the parameter copies are aligned to: the largest power of two
  // dividing any parameter's size, which is at least its alignment (a size
  // is a multiple of its alignment).
  size_t storage_align;
};

class KernelRegistry {
 public:
  explicit KernelRegistry(HandleCounter* counter) : counter_(counter) {}

  // Adds fn as `name` to module m (a new module when m is 0); returns the
  // module. INVALID_ARGUMENT for a bad argument, an unknown module or a
  // name already in the module, or a layout whose parameters overlap.
  // layout == nullptr: the parameters are unknown.
  ModuleHandle add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn, void* user,
                   const ParamInfo* layout, size_t nparams);
  // INVALID_ARGUMENT for an unknown module.
  void unload(ModuleHandle m);
  // NOT_FOUND when the module has no such function.
  FuncHandle function(ModuleHandle m, const char* name) const;
  // Modules not unloaded (a teardown check).
  size_t live_modules() const;
  // INVALID_ARGUMENT for an unknown handle, NOT_FOUND for one whose module
  // was unloaded (fatal under METRALE_HOST_DEAD_HANDLE_ABORT=1: on cuda it
  // would be a freed function).
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
