// metrale_stream_wrap: a handle for a stream this library did not create
// (the CUDA runtime's, PyTorch's current stream), so that pooled memory can
// be ordered on the stream a framework works on. The backend says what a
// native value means (backend.hpp stream_wrap); core keeps one handle per
// native value, counted, so two users wrapping the same stream never
// retire it under each other.
#include "core/context.hpp"

using metrale::fail;
using metrale::core::StreamObj;
using metrale::core::handle_id::handle_from;
using metrale::core::handle_id::value_of;

metrale_stream* metrale_context::stream_wrap(uint64_t native) {
  fault_.check();
  std::lock_guard<std::mutex> lock(wraps_mutex_);
  // Keyed by the backend handle where the backend keeps the native stream
  // (so 0 and CU_STREAM_LEGACY, one stream to the driver, share a handle),
  // by the native value where it makes a stream for it.
  auto reuse = [&](uint64_t key) -> metrale_stream* {
    auto it = wraps_.find(key);
    if (it == wraps_.end()) return nullptr;
    it->second.count += 1;
    return it->second.handle;
  };
  if (metrale_stream* s = reuse(native)) return s;
  bool owned = false;
  StreamHandle h = device([&] { return backend_->stream_wrap(native, &owned); });
  if (!owned && h != native) {
    if (metrale_stream* s = reuse(h)) return s;
  }
  if (pool_) pool_->stream_born(h);  // a retired stream's value, reused
  const uint64_t key = owned ? native : h;
  uint64_t v = 0;
  try {
    v = streams_.insert([&](StreamObj& s) {
      s.owner = this;
      s.handle = h;
      s.wrapped = true;
      s.owns_backend = owned;
      s.native = key;
    });
    if (StreamObj* o = streams_.find(v)) o->id = v;  // the event log names it so
    wraps_.emplace(key, Wrap{handle_from<metrale_stream>(v), 1});
  } catch (...) {
    if (v != 0) streams_.erase(v, [](StreamObj&) {});
    if (owned) release_stream_handle(h);  // a settle may have seen it live
    throw;
  }
  return handle_from<metrale_stream>(v);
}

bool metrale_context::drop_wrap(metrale_stream* s, const StreamObj* st) {
  auto it = wraps_.find(st->native);
  // Ended by another thread's destroy since stream_of found the object.
  if (it == wraps_.end() || it->second.handle != s) refuse_handle("stream", s);
  if (--it->second.count > 0) return false;
  wraps_.erase(it);
  return true;
}
