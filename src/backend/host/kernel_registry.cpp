#include "backend/host/kernel_registry.hpp"

#include <cinttypes>
#include <cstdio>
#include <mutex>

#include "backend/error.hpp"

namespace metrale::backend::host {

namespace {

std::string hex(uint64_t value) {
  char text[32];
  std::snprintf(text, sizeof text, "0x%" PRIx64, value);
  return text;
}

size_t natural_alignment(size_t size) {
  size_t align = size & (~size + 1);  // lowest set bit: largest power of two dividing size
  return align > 8 ? 8 : align;
}

}  // namespace

std::vector<ParamInfo> param_layout(const size_t* sizes, size_t n, size_t* total) {
  std::vector<ParamInfo> layout;
  layout.reserve(n);
  size_t offset = 0;
  for (size_t i = 0; i < n; ++i) {
    const size_t align = natural_alignment(sizes[i]);
    offset = (offset + align - 1) & ~(align - 1);
    layout.push_back(ParamInfo{offset, sizes[i]});
    offset += sizes[i];
  }
  *total = offset;
  return layout;
}

ModuleHandle KernelRegistry::add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn,
                                 void* user, const size_t* param_sizes, size_t nparams) {
  if (name == nullptr || name[0] == '\0') {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: a host kernel needs a non-empty name");
  }
  if (fn == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: host kernel '") + name + "' has a NULL function");
  }
  if (param_sizes != nullptr) {
    for (size_t i = 0; i < nparams; ++i) {
      // 4 KiB is CUDA's limit on a kernel's parameters as a whole.
      if (param_sizes[i] == 0 || param_sizes[i] > 4096) {
        fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("host backend: host kernel '") + name +
                                                 "' parameter " + std::to_string(i) + " has size " +
                                                 std::to_string(param_sizes[i]) +
                                                 " (must be 1..4096)");
      }
    }
  }

  auto function = std::make_shared<HostFunction>();
  function->fn = fn;
  function->user = user;
  function->sizes_known = param_sizes != nullptr;
  function->args_bytes = 0;
  if (function->sizes_known) {
    function->layout = param_layout(param_sizes, nparams, &function->args_bytes);
  }

  std::unique_lock<std::shared_mutex> lock(mutex_);
  Module* module = nullptr;
  if (m != 0) {
    auto it = modules_.find(m);
    if (it == modules_.end()) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "host backend: module handle " + hex(m) + " is unknown or unloaded");
    }
    module = &it->second;
    if (module->functions.count(name) != 0) {
      fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: module#" +
                                               std::to_string(module->number) +
                                               " already has a function '" + name + "'");
    }
  } else {
    m = counter_->next();
    module = &modules_.emplace(m, Module{++modules_made_, {}}).first->second;
  }
  function->label = "module#" + std::to_string(module->number) + "::" + name;
  const FuncHandle f = counter_->next();
  module->functions.emplace(name, f);
  functions_.emplace(f, std::move(function));
  return m;
}

void KernelRegistry::unload(ModuleHandle m) {
  std::unique_lock<std::shared_mutex> lock(mutex_);
  auto it = modules_.find(m);
  if (it == modules_.end()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: module handle " + hex(m) + " is unknown or already unloaded");
  }
  for (const auto& entry : it->second.functions) {
    functions_.erase(entry.second);
    unloaded_.insert(entry.second);
  }
  modules_.erase(it);
}

FuncHandle KernelRegistry::function(ModuleHandle m, const char* name) const {
  if (name == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: function name is NULL");
  }
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = modules_.find(m);
  if (it == modules_.end()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "host backend: module handle " + hex(m) + " is unknown or unloaded");
  }
  auto fit = it->second.functions.find(name);
  if (fit == it->second.functions.end()) {
    fail(METRALE_ERROR_NOT_FOUND, std::string("module has no function '") + name + "'");
  }
  return fit->second;
}

std::shared_ptr<const HostFunction> KernelRegistry::get(FuncHandle f) const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  auto it = functions_.find(f);
  if (it != functions_.end()) return it->second;
  if (unloaded_.count(f) != 0) {
    fail(METRALE_ERROR_NOT_FOUND,
         "host backend: function handle " + hex(f) + " belongs to an unloaded module");
  }
  fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: function handle " + hex(f) + " is unknown");
}

}  // namespace metrale::backend::host
