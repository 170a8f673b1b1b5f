// Modules by name (loaded images or host-registered functions) and the
// kernel cache: one kernel handle per module::function and module load,
// owned here until the context is destroyed. A kernel of an unloaded module
// keeps its slot (and its handle stays known), marked stale: launching it is
// NOT_FOUND, not a use of the unloaded module. The backend module itself is
// unloaded kKeptModules unloads later (modules.cpp says why).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "backend/backend.hpp"
#include "core/handle_graveyard.hpp"
#include "core/intern.hpp"
#include "core/slot_table.hpp"

struct metrale_context;
struct metrale_kernel;  // the public handle type: never defined

namespace metrale::core {

struct KernelObj {
  metrale_context* owner = nullptr;
  std::atomic<bool> stale{false};  // its module was unloaded
  metrale::backend::FuncHandle func = 0;
  const char* name = nullptr;  // "module::function", interned
  bool layout_known = false;
  std::vector<metrale::backend::ParamInfo> params;
  size_t params_bytes = 0;      // last.offset + last.size
  const char* site = nullptr;   // "file:line" of the lookup that made it, interned
};

class Modules {
 public:
  // Unloaded backend modules kept loaded (their device code and globals):
  // few, since each may hold megabytes; a launch that passed the stale
  // check is a few instructions from the driver.
  static constexpr size_t kKeptModules = 8;

  Modules(backend::Backend& b, InternTable& strings) : backend_(b), strings_(strings) {}

  void load(const std::string& name, const void* image, size_t size);
  void unload(const std::string& name);
  bool has(const std::string& name) const;
  // The handle of module::func. NOT_FOUND for an unknown module or function.
  metrale_kernel* kernel(metrale_context* owner, const std::string& module,
                         const std::string& func, const char* file, int line);
  // layout: each parameter's offset and size (param_layout.hpp), nullptr
  // when the parameters are unknown.
  void register_host(const std::string& module, const std::string& func,
                     metrale_host_kernel_fn fn, void* user, const backend::ParamInfo* layout,
                     size_t nparams);
  // The kernel object of a handle of this context (stale ones included), or
  // nullptr: a lock-free lookup on the launch path.
  KernelObj* find(const metrale_kernel* k) const noexcept {
    return kernels_.find(handle_id::value_of(k));
  }
  // Context teardown: unloads every module, the kept ones too, errors ignored.
  void unload_all() noexcept;

 private:
  struct Module {
    backend::ModuleHandle handle = 0;
    bool host = false;
    std::set<std::string> host_functions;
    std::vector<KernelObj*> kernels;
  };

  backend::Backend& backend_;
  InternTable& strings_;
  mutable std::mutex mutex_;
  std::map<std::string, Module> modules_;
  std::unordered_map<std::string, uint64_t> cache_;  // "module\0function" -> handle
  SlotTable<KernelObj> kernels_{"kernel"};
  HandleGraveyard unloaded_{kKeptModules};
};

}  // namespace metrale::core
