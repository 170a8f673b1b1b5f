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

namespace {

// What the kernel audit keeps of a name that could not be copied for want of
// host memory: the lookup happened and is recorded all the same (rule 1: the
// bookkeeping after the act cannot fail the call).
constexpr const char* kNameNoMemory = "<name not kept: out of host memory>";

template <class F>
const char* kept_or_placeholder(F&& intern) noexcept {
  try {
    return intern();
  } catch (...) {
    return kNameNoMemory;
  }
}

}  // namespace

metrale_kernel* metrale_context::kernel_get(const char* module, const char* func,
                                            const char* file, int line) {
  fault_.check();
  if (file == nullptr) file = "<unknown>";
  metrale_kernel* k = nullptr;
  try {
    k = device([&] { return modules_->kernel(this, module, func, file, line); });
  } catch (const std::bad_alloc&) {
    throw;  // short of host memory: no lookup made, nothing counted (rule 1)
  } catch (...) {
    // The names of a failed lookup are the caller's to vary without end: the
    // audit keeps them only within a budget (the error message has them all).
    metrale::core::Counters::bump(counters_.kernel_lookups);
    metrale::core::Counters::bump(counters_.kernel_lookup_misses);
    audit_.push(metrale_kernel_audit_entry_t{
        kept_or_placeholder([&] { return strings_.intern_untrusted(module); }),
        kept_or_placeholder([&] { return strings_.intern_untrusted(func); }), 0,
        kept_or_placeholder([&] { return strings_.intern_untrusted(file); }), line});
    throw;
  }
  // Counted once found; module and function name a kernel that exists; the
  // file is the caller's text (a generated name per call must not grow the
  // context for good).
  metrale::core::Counters::bump(counters_.kernel_lookups);
  audit_.push(metrale_kernel_audit_entry_t{
      kept_or_placeholder([&] { return strings_.intern(module); }),
      kept_or_placeholder([&] { return strings_.intern(func); }), 1,
      kept_or_placeholder([&] { return strings_.intern_untrusted(file); }), line});
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
