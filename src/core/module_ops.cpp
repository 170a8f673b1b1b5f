// Module loading and kernel lookup, with the lookup audit and counters.
#include <vector>

#include "core/context.hpp"
#include "core/module_file.hpp"
#include "core/param_layout.hpp"

using metrale::Error;
using metrale::fail;

void metrale_context::module_load_data(const char* name, const void* image, size_t size) {
  fault_.check();
  device([&] { modules_->load(name, image, size); });
}

void metrale_context::module_load_file(const char* name, const char* path) {
  fault_.check();
  std::vector<char> image = metrale::core::read_module_file(path);
  device([&] { modules_->load(name, image.data(), image.size()); });
}

void metrale_context::module_unload(const char* name) {
  fault_.check();
  device([&] { modules_->unload(name); });
}

bool metrale_context::has_module(const char* name) const { return modules_->has(name); }

metrale_kernel* metrale_context::kernel_get(const char* module, const char* func,
                                            const char* file, int line) {
  fault_.check();
  if (file == nullptr) file = "<unknown>";
  metrale::core::Counters::bump(counters_.kernel_lookups);
  metrale_kernel* k = nullptr;
  try {
    k = device([&] { return modules_->kernel(this, module, func, file, line); });
  } catch (...) {
    // The names of a failed lookup are the caller's to vary without end: the
    // audit keeps them only within a budget (the error message has them all).
    metrale::core::Counters::bump(counters_.kernel_lookup_misses);
    audit_.push(metrale_kernel_audit_entry_t{strings_.intern_untrusted(module),
                                             strings_.intern_untrusted(func), 0,
                                             strings_.intern_untrusted(file), line});
    throw;
  }
  // Module and function name a kernel that exists; the file is the caller's
  // text (a generated name per call must not grow the context for good).
  audit_.push(metrale_kernel_audit_entry_t{strings_.intern(module), strings_.intern(func), 1,
                                           strings_.intern_untrusted(file), line});
  return k;
}

void metrale_context::register_host(const char* module, const char* func,
                                    metrale_host_kernel_fn fn, void* user,
                                    const size_t* param_sizes, const size_t* param_aligns,
                                    size_t nparams) {
  fault_.check();
  // The layout is made here, by the one packing rule, for any backend; the
  // host backend only stores it.
  std::vector<metrale::backend::ParamInfo> layout;
  if (param_sizes != nullptr) {
    try {
      metrale::core::check_param_count(nparams);  // before anything is sized by it
    } catch (const Error& e) {
      throw Error(e.status(), std::string("host kernel ") + module + "::" + func + ": " + e.what());
    }
    std::vector<size_t> inferred;
    if (param_aligns == nullptr) {
      inferred.resize(nparams);
      for (size_t i = 0; i < nparams; ++i) {
        inferred[i] = metrale::core::inferred_alignment(param_sizes[i]);
      }
      param_aligns = inferred.data();
    }
    size_t args_bytes = 0;
    try {
      layout = metrale::core::natural_layout(param_sizes, param_aligns, nparams, &args_bytes);
    } catch (const Error& e) {
      throw Error(e.status(), std::string("host kernel ") + module + "::" + func + ": " + e.what());
    }
  }
  // A kernel without parameters still has a known (empty) layout: a non-null
  // pointer says so.
  static const metrale::backend::ParamInfo kNoParams[1] = {{0, 0}};
  const metrale::backend::ParamInfo* known =
      param_sizes == nullptr ? nullptr : (layout.empty() ? kNoParams : layout.data());
  device([&] { modules_->register_host(module, func, fn, user, known, layout.size()); });
}
