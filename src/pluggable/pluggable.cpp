// libmetrale_gpu_pluggable: PyTorch's CUDAPluggableAllocator entry points
// (and CuPy's, through the Python package) over one context per device.
// See include/metrale_gpu_pluggable.h. Only the public C API of
// libmetrale_gpu is used: this library is a client like any other.
#include "metrale_gpu_pluggable.h"

#include <pthread.h>

#include <atomic>
#include <cstddef>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <shared_mutex>
#include <string>
#include <unordered_map>

#define PLUGGABLE_API extern "C" __attribute__((visibility("default")))

namespace {

constexpr int kMaxDevices = METRALE_PLUGGABLE_MAX_DEVICES;
constexpr const char* kDefaultSite = "<pluggable allocator>";

// One device: its context (published once, read lock-free) and the
// handles of the native streams wrapped on it (kept for the process's
// life, like the context, so a handle read from the map stays valid).
struct Device {
  std::atomic<metrale_context_t*> ctx{nullptr};
  std::mutex streams_mutex;
  std::unordered_map<void*, metrale_stream_t*> streams;
};

struct State {
  std::mutex create_mutex;  // context creation and configure
  bool any_created = false;
  bool configured = false;
  metrale_context_options_t opts{};
  Device devices[kMaxDevices];
  // The site function: fn/user replaced under the unique lock, called
  // under the shared one (set_site_fn waits for running calls).
  std::atomic<metrale_pluggable_site_fn> site_fn{nullptr};
  void* site_user = nullptr;
  std::shared_mutex site_mutex;
};

State& state() {
  // Never destroyed: frameworks free tensors during interpreter exit.
  static State* s = new State;
  return *s;
}

thread_local bool t_in_site_fn = false;

// This library's message for the calling thread (see
// metrale_pluggable_last_error_message): a malloc'ed block held by a
// pthread key whose destructor is libc's free, not a thread_local
// std::string. A framework may free its tensors at thread exit from a
// pthread key destructor, which runs after the thread's C++ thread_local
// objects were destroyed: a failed free there wrote into (and freed again)
// the destroyed string. A block set by such a late call is freed in a later
// round of the key destructors.
struct MessageBlock {
  size_t capacity;  // bytes of text, NUL included
  char text[1];
};

bool message_key(pthread_key_t* out) noexcept {
  static pthread_key_t key;
  static const bool made = pthread_key_create(&key, std::free) == 0;
  *out = key;
  return made;
}

const char* message() noexcept {
  pthread_key_t key;
  if (!message_key(&key)) return "";
  const auto* block = static_cast<const MessageBlock*>(pthread_getspecific(key));
  return block != nullptr ? block->text : "";
}

metrale_status_t refuse(metrale_status_t status, const char* text) {
  // No key or no memory for the text: the status still says what happened.
  pthread_key_t key;
  if (!message_key(&key)) return status;
  const size_t n = std::strlen(text);
  auto* block = static_cast<MessageBlock*>(pthread_getspecific(key));
  if (block == nullptr || block->capacity < n + 1) {
    const size_t capacity = n + 1 < 128 ? 128 : n + 1;
    auto* grown = static_cast<MessageBlock*>(
        std::realloc(block, offsetof(MessageBlock, text) + capacity));
    if (grown == nullptr) {
      if (block != nullptr) block->text[0] = '\0';
      return status;
    }
    if (pthread_setspecific(key, grown) != 0) {
      std::free(grown);
      (void)pthread_setspecific(key, nullptr);  // the old block is gone with the realloc
      return status;
    }
    grown->capacity = capacity;
    block = grown;
  }
  std::memcpy(block->text, text, n + 1);
  return status;
}

// A failed call of libmetrale_gpu: its message becomes ours too.
metrale_status_t from_library(metrale_status_t status) {
  return refuse(status, metrale_last_error_message());
}

// One stderr line per failure: the entry points cannot return a status.
void report(const char* what, ssize_t size, int device) {
  std::fprintf(stderr, "metrale_gpu_pluggable: %s (%zd bytes, device %d) failed: %s\n", what,
               size, device, message());
}

metrale_status_t context_of(int device, metrale_context_t** out) {
  State& s = state();
  Device& d = s.devices[device];
  metrale_context_t* ctx = d.ctx.load(std::memory_order_acquire);
  if (ctx != nullptr) {
    *out = ctx;
    return METRALE_OK;
  }
  std::lock_guard<std::mutex> lock(s.create_mutex);
  ctx = d.ctx.load(std::memory_order_acquire);
  if (ctx == nullptr) {
    metrale_context_options_t opts;
    if (s.configured) {
      opts = s.opts;
    } else {
      metrale_context_options_init(&opts);
    }
    opts.device = device;
    metrale_status_t st = metrale_context_create(&opts, &ctx);
    if (st != METRALE_OK) return from_library(st);  // tried again on the next call
    d.ctx.store(ctx, std::memory_order_release);
    s.any_created = true;
  }
  *out = ctx;
  return METRALE_OK;
}

// The handle for a native stream on this device's context, wrapped once.
metrale_status_t stream_of(Device& d, metrale_context_t* ctx, void* native,
                           metrale_stream_t** out) {
  // The last stream this thread used: no lock on the common path.
  struct Last {
    metrale_context_t* ctx;
    void* native;
    metrale_stream_t* handle;
  };
  thread_local Last last{nullptr, nullptr, nullptr};
  if (last.ctx == ctx && last.native == native && last.handle != nullptr) {
    *out = last.handle;
    return METRALE_OK;
  }
  std::lock_guard<std::mutex> lock(d.streams_mutex);
  auto it = d.streams.find(native);
  if (it == d.streams.end()) {
    metrale_stream_t* h = nullptr;
    metrale_status_t st = metrale_stream_wrap(ctx, native, &h);
    if (st != METRALE_OK) return from_library(st);
    try {
      it = d.streams.emplace(native, h).first;
    } catch (...) {
      metrale_stream_destroy(ctx, h);
      return refuse(METRALE_ERROR_OUT_OF_MEMORY, "out of host memory");
    }
  }
  last = Last{ctx, native, it->second};
  *out = it->second;
  return METRALE_OK;
}

bool device_ok(int device) { return device >= 0 && device < kMaxDevices; }

}  // namespace

PLUGGABLE_API void* metrale_pluggable_alloc(ssize_t size, int device, void* stream) {
  if (size == 0) return nullptr;
  if (size < 0 || !device_ok(device)) {
    refuse(METRALE_ERROR_INVALID_ARGUMENT,
           size < 0 ? "size is negative" : "device is outside 0..METRALE_PLUGGABLE_MAX_DEVICES-1");
    report("alloc", size, device);
    return nullptr;
  }
  metrale_context_t* ctx = nullptr;
  if (context_of(device, &ctx) != METRALE_OK) {
    report("creating the device's context for alloc", size, device);
    return nullptr;
  }
  metrale_stream_t* s = nullptr;
  if (stream_of(state().devices[device], ctx, stream, &s) != METRALE_OK) {
    report("wrapping the allocation's stream", size, device);
    return nullptr;
  }
  State& st = state();
  char file[512];
  const char* site = kDefaultSite;
  int line = 0;
  if (st.site_fn.load(std::memory_order_acquire) != nullptr && !t_in_site_fn) {
    std::shared_lock<std::shared_mutex> lock(st.site_mutex);
    metrale_pluggable_site_fn fn = st.site_fn.load(std::memory_order_acquire);
    if (fn != nullptr) {
      t_in_site_fn = true;
      file[0] = '\0';
      int l = 0;
      if (fn(file, sizeof file, &l, st.site_user) != 0) {
        file[sizeof file - 1] = '\0';
        if (file[0] != '\0') {
          site = file;
          line = l;
        }
      }
      t_in_site_fn = false;
    }
  }
  metrale_devptr_t p = 0;
  if (metrale_status_t rc = metrale_alloc_async_at(ctx, static_cast<size_t>(size), s, site, line, &p);
      rc != METRALE_OK) {
    from_library(rc);
    report("alloc", size, device);
    return nullptr;
  }
  return reinterpret_cast<void*>(static_cast<uintptr_t>(p));
}

PLUGGABLE_API void metrale_pluggable_free(void* ptr, ssize_t size, int device, void* stream) {
  if (ptr == nullptr) return;
  if (!device_ok(device)) {
    refuse(METRALE_ERROR_INVALID_ARGUMENT, "device is outside 0..METRALE_PLUGGABLE_MAX_DEVICES-1");
    report("free", size, device);
    return;
  }
  metrale_context_t* ctx = state().devices[device].ctx.load(std::memory_order_acquire);
  if (ctx == nullptr) {
    refuse(METRALE_ERROR_NOT_FOUND,
           "the device has no context: nothing was allocated there through this library");
    report("free", size, device);
    return;
  }
  metrale_stream_t* s = nullptr;
  if (stream_of(state().devices[device], ctx, stream, &s) != METRALE_OK) {
    report("wrapping the free's stream", size, device);
    return;
  }
  if (metrale_status_t rc = metrale_free_async(
          ctx, static_cast<metrale_devptr_t>(reinterpret_cast<uintptr_t>(ptr)), s);
      rc != METRALE_OK) {
    from_library(rc);
    report("free", size, device);
  }
}

PLUGGABLE_API metrale_status_t metrale_pluggable_configure(const metrale_context_options_t* opts) {
  State& s = state();
  metrale_context_options_t o;
  metrale_context_options_init(&o);
  if (opts != nullptr) {
    // The 0.1 layout is accepted, as metrale_context_create accepts it.
    const size_t old = offsetof(metrale_context_options_t, pool);
    if (opts->struct_size != sizeof o && opts->struct_size != old) {
      return refuse(METRALE_ERROR_INVALID_ARGUMENT,
                    "opts->struct_size is neither sizeof(metrale_context_options_t) nor the 0.1 "
                    "layout's size");
    }
    std::memcpy(&o, opts, opts->struct_size);
    o.struct_size = sizeof o;
  }
  std::lock_guard<std::mutex> lock(s.create_mutex);
  if (s.any_created) {
    return refuse(METRALE_ERROR_INVALID_ARGUMENT,
                  "too late: a device's context exists already (configure before the first "
                  "allocation or metrale_pluggable_context call)");
  }
  s.opts = o;
  s.configured = true;
  return METRALE_OK;
}

PLUGGABLE_API metrale_status_t metrale_pluggable_context(int device, metrale_context_t** out) {
  if (out == nullptr) return refuse(METRALE_ERROR_INVALID_ARGUMENT, "out is NULL");
  if (!device_ok(device)) {
    return refuse(METRALE_ERROR_INVALID_ARGUMENT, "device is outside 0..METRALE_PLUGGABLE_MAX_DEVICES-1");
  }
  return context_of(device, out);
}

PLUGGABLE_API metrale_status_t metrale_pluggable_set_site_fn(metrale_pluggable_site_fn fn,
                                                             void* user) {
  if (t_in_site_fn) {
    return refuse(METRALE_ERROR_INVALID_ARGUMENT,
                  "called from inside a site function (it would wait for its own caller)");
  }
  State& s = state();
  std::unique_lock<std::shared_mutex> lock(s.site_mutex);
  s.site_user = user;
  s.site_fn.store(fn, std::memory_order_release);
  return METRALE_OK;
}

PLUGGABLE_API const char* metrale_pluggable_last_error_message(void) { return message(); }
