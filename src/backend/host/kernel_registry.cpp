#include "backend/host/kernel_registry.hpp"

#include <cinttypes>
#include <cstdlib>
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

size_t lowest_bit(size_t v) { return v & (~v + 1); }

}  // namespace

ModuleHandle KernelRegistry::add(ModuleHandle m, const char* name, metrale_host_kernel_fn fn,
                                 void* user, const ParamInfo* layout, size_t nparams) {
  if (name == nullptr || name[0] == '\0') {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: a host kernel needs a non-empty name");
  }
  if (fn == nullptr) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         std::string("host backend: host kernel '") + name + "' has a NULL function");
  }
  auto function = std::make_shared<HostFunction>();
  function->fn = fn;
  function->user = user;
  function->sizes_known = layout != nullptr;
  function->args_bytes = 0;
  function->storage_align = 8;
  if (function->sizes_known) {
    // Core laid the parameters out; checked again here because the copies
    // at launch write exactly these ranges.
    size_t end = 0;
    for (size_t i = 0; i < nparams; ++i) {
      // 4 KiB is CUDA's limit on a kernel's parameters as a whole.
      if (layout[i].size == 0 || layout[i].size > 4096 || layout[i].offset < end ||
          layout[i].offset > SIZE_MAX - 4096) {
        fail(METRALE_ERROR_INVALID_ARGUMENT,
             std::string("host backend: host kernel '") + name + "' parameter " +
                 std::to_string(i) + " has offset " + std::to_string(layout[i].offset) +
                 " and size " + std::to_string(layout[i].size) +
                 " (sizes 1..4096, after the parameter before)");
      }
      end = layout[i].offset + layout[i].size;
      const size_t align = lowest_bit(layout[i].size);
      if (align > function->storage_align) function->storage_align = align;
    }
    function->layout.assign(layout, layout + nparams);
    function->args_bytes = end;
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

size_t KernelRegistry::live_modules() const {
  std::shared_lock<std::shared_mutex> lock(mutex_);
  return modules_.size();
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
    // The cuda backend would hand the driver a freed CUfunction here: the
    // core keeps unloaded modules loaded for a while so that a launch racing
    // an unload never does. Race tests make it fatal (as handle_table.hpp).
    const char* strict = std::getenv("METRALE_HOST_DEAD_HANDLE_ABORT");
    if (strict != nullptr && strict[0] == '1') {
      std::fprintf(stderr,
                   "host backend: function handle %s of an unloaded module launched or queried "
                   "(METRALE_HOST_DEAD_HANDLE_ABORT=1)\n",
                   hex(f).c_str());
      std::abort();
    }
    fail(METRALE_ERROR_NOT_FOUND,
         "host backend: function handle " + hex(f) + " belongs to an unloaded module");
  }
  fail(METRALE_ERROR_INVALID_ARGUMENT, "host backend: function handle " + hex(f) + " is unknown");
}

}  // namespace metrale::backend::host
