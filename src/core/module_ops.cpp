// Module loading and kernel lookup, with the lookup audit and counters.
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <vector>

#include "core/context.hpp"

using metrale::Error;
using metrale::fail;

void metrale_context::module_load_data(const char* name, const void* image, size_t size) {
  fault_.check();
  device([&] { modules_->load(name, image, size); });
}

void metrale_context::module_load_file(const char* name, const char* path) {
  fault_.check();
  std::FILE* f = std::fopen(path, "rb");
  if (f == nullptr) {
    fail(METRALE_ERROR_NOT_FOUND,
         std::string("cannot read module file '") + path + "': " + std::strerror(errno));
  }
  std::vector<char> image;
  char chunk[65536];
  size_t n;
  while ((n = std::fread(chunk, 1, sizeof chunk, f)) > 0) image.insert(image.end(), chunk, chunk + n);
  int read_error = std::ferror(f) ? errno : 0;
  std::fclose(f);
  if (read_error != 0) {
    fail(METRALE_ERROR_NOT_FOUND,
         std::string("cannot read module file '") + path + "': " + std::strerror(read_error));
  }
  if (image.empty()) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, std::string("module file '") + path + "' is empty");
  }
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
  metrale_kernel_audit_entry_t audit{strings_.intern(module), strings_.intern(func), 1,
                                     strings_.intern(file), line};
  try {
    metrale_kernel* k = device([&] { return modules_->kernel(this, module, func, file, line); });
    audit_.push(audit);
    return k;
  } catch (...) {
    metrale::core::Counters::bump(counters_.kernel_lookup_misses);
    audit.found = 0;
    audit_.push(audit);
    throw;
  }
}

void metrale_context::register_host(const char* module, const char* func,
                                    metrale_host_kernel_fn fn, void* user,
                                    const size_t* param_sizes, size_t nparams) {
  fault_.check();
  device([&] { modules_->register_host(module, func, fn, user, param_sizes, nparams); });
}
