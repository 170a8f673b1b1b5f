// Module loads and unloads, kernel lookup. An unloaded module's kernels
// are refused at once (stale), but its backend module lives on until
// kKeptModules more were unloaded after it, or the context goes: a launch
// on another thread may have passed the stale check just before the unload
// and still be on its way to the driver with the module's function (rule 2
// calls that a race in the caller; it must not hand the driver a freed
// CUfunction). A fence on the launch path would cost every launch.
#include "core/modules.hpp"

#include "backend/error.hpp"
#include "core/log.hpp"

namespace metrale::core {

namespace {

// Only logged: the caller's unload returned long ago.
void unload_logged(backend::Backend& b, backend::ModuleHandle h) noexcept {
  try {
    try {
      b.module_unload(h);
    } catch (const Error& e) {
      log().warn("unloading a module the caller unloaded earlier failed: {}", e.what());
    }
  } catch (...) {
    // No memory to log it: the module dies with the context.
  }
}

}  // namespace

void Modules::load(const std::string& name, const void* image, size_t size) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (modules_.count(name) != 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "a module named '" + name + "' is already loaded in this context");
  }
  Module m;
  m.handle = backend_.module_load(image, size);
  modules_.emplace(name, std::move(m));
}

void Modules::unload(const std::string& name) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modules_.find(name);
  if (it == modules_.end()) fail(METRALE_ERROR_NOT_FOUND, "no module named '" + name + "'");
  Module m = std::move(it->second);
  modules_.erase(it);
  for (KernelObj* k : m.kernels) k->stale.store(true, std::memory_order_release);
  // No memory to keep it: unloaded now, its error the caller's.
  if (!unloaded_.bury(m.handle)) backend_.module_unload(m.handle);
  uint64_t old = 0;
  while (unloaded_.take_overdue(&old)) unload_logged(backend_, old);
}

bool Modules::has(const std::string& name) const {
  std::lock_guard<std::mutex> lock(mutex_);
  return modules_.count(name) != 0;
}

metrale_kernel* Modules::kernel(metrale_context* owner, const std::string& module,
                                const std::string& func, const char* file, int line) {
  std::string key = module;
  key.push_back('\0');
  key += func;
  std::lock_guard<std::mutex> lock(mutex_);
  auto hit = cache_.find(key);
  if (hit != cache_.end()) {
    const KernelObj* cached = kernels_.find(hit->second);
    if (cached != nullptr && !cached->stale.load()) {
      return handle_id::handle_from<metrale_kernel>(hit->second);
    }
  }

  auto mod = modules_.find(module);
  if (mod == modules_.end()) {
    fail(METRALE_ERROR_NOT_FOUND, "kernel lookup " + module + "::" + func +
                                      ": no module named '" + module + "' in this context");
  }
  backend::FuncHandle f;
  try {
    f = backend_.module_function(mod->second.handle, func.c_str());
  } catch (const Error& e) {
    throw Error(e.status(), "kernel lookup " + module + "::" + func + ": " + e.what(),
                e.driver_code());
  }
  const char* name = strings_.intern(module + "::" + func);
  const char* site = strings_.intern(std::string(file) + ":" + std::to_string(line));
  std::vector<backend::ParamInfo> params;
  const bool layout_known = backend_.function_params(f, &params);
  mod->second.kernels.reserve(mod->second.kernels.size() + 1);
  cache_.reserve(cache_.size() + 1);
  KernelObj* made = nullptr;
  const uint64_t v = kernels_.insert([&](KernelObj& k) {
    k.owner = owner;
    k.func = f;
    k.name = name;
    k.site = site;
    k.layout_known = layout_known;
    k.params = std::move(params);
    if (k.layout_known && !k.params.empty()) {
      k.params_bytes = k.params.back().offset + k.params.back().size;
    }
    made = &k;
  });
  mod->second.kernels.push_back(made);
  cache_[key] = v;
  return handle_id::handle_from<metrale_kernel>(v);
}

void Modules::register_host(const std::string& module, const std::string& func,
                            metrale_host_kernel_fn fn, void* user,
                            const backend::ParamInfo* layout, size_t nparams) {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = modules_.find(module);
  if (it == modules_.end()) {
    Module m;
    m.host = true;
    m.handle = backend_.host_module_add(0, func.c_str(), fn, user, layout, nparams);
    m.host_functions.insert(func);
    modules_.emplace(module, std::move(m));
    return;
  }
  Module& m = it->second;
  if (!m.host) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "module '" + module + "' was loaded from an image; host kernels need a module of their own");
  }
  if (m.host_functions.count(func) != 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "module '" + module + "' already has a function named '" + func + "'");
  }
  backend_.host_module_add(m.handle, func.c_str(), fn, user, layout, nparams);
  m.host_functions.insert(func);
}

void Modules::unload_all() noexcept {
  std::lock_guard<std::mutex> lock(mutex_);
  for (auto& kv : modules_) {
    for (KernelObj* k : kv.second.kernels) k->stale.store(true, std::memory_order_release);
    try {
      backend_.module_unload(kv.second.handle);
    } catch (...) {
      // Teardown goes on: the context is going away either way.
    }
  }
  modules_.clear();
  std::vector<uint64_t> kept;
  try {
    kept = unloaded_.take_all();
  } catch (...) {
    log().warn("unloaded modules' backend objects leaked at teardown (no memory)");
  }
  for (uint64_t h : kept) {
    try {
      backend_.module_unload(h);
    } catch (...) {
      // As above.
    }
  }
}

}  // namespace metrale::core
