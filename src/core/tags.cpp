// The process-wide tag table and each thread's tag stack (see tags.hpp).
#include "core/tags.hpp"

#include <pthread.h>

#include <cstdlib>
#include <deque>
#include <mutex>
#include <new>
#include <string>
#include <unordered_map>

#include "backend/error.hpp"
#include "metrale_gpu.h"

namespace metrale::core::tags {

static_assert(kMaxBytes == METRALE_TAG_MAX_BYTES && kMaxDepth == METRALE_TAG_MAX_DEPTH &&
                  kMaxTags == METRALE_TAG_MAX_TAGS,
              "tags.hpp and the header name the same bounds");

namespace {

using detail::t_current;

constexpr size_t kNodeOverhead = 64;  // a map node and a deque slot, roughly

struct Table {
  std::mutex mutex;
  std::deque<std::string> texts;  // id - 1 -> text; a deque: c_str() never moves
  std::unordered_map<std::string_view, uint32_t> ids;  // views into texts
  size_t bytes = 0;
};

Table& table() {
  // Never destroyed: entries may be read from other threads' exit paths.
  static Table* t = new Table;
  return *t;
}

// This thread's tags below t_current, innermost last: a block malloc'ed at
// its first push and held by a pthread key whose destructor is libc's free.
// Not a vector in a thread_local holder: a thread's last calls may come from
// a pthread key destructor, which runs after the thread's C++ thread_local
// objects were destroyed (the vector's storage was then written after its
// free). Nor a thread_local array: the library's TLS is static (its
// initial-exec variables), and a dlopen (Python's ctypes) finds only a small
// surplus of static TLS. A block set again by such a late push is freed in a
// later round of the key destructors.
struct Stack {
  size_t depth;
  uint32_t below[kMaxDepth];
};

pthread_key_t* stack_key() noexcept {
  static pthread_key_t key;
  static const bool made = pthread_key_create(&key, std::free) == 0;
  return made ? &key : nullptr;
}

Stack* stack_or_null() noexcept {
  pthread_key_t* key = stack_key();
  return key != nullptr ? static_cast<Stack*>(pthread_getspecific(*key)) : nullptr;
}

void check_text(const char* text) {
  if (text == nullptr) fail(METRALE_ERROR_INVALID_ARGUMENT, "tag is NULL");
  size_t n = 0;
  for (; n <= kMaxBytes && text[n] != '\0'; ++n) {
    const unsigned char c = static_cast<unsigned char>(text[n]);
    if (c < 0x20 || c == 0x7f) {
      fail(METRALE_ERROR_INVALID_ARGUMENT,
           "tag has a control byte at offset " + std::to_string(n) +
               " (tags are printable text; they appear in reports and logs)");
    }
  }
  if (n == 0) fail(METRALE_ERROR_INVALID_ARGUMENT, "tag is empty");
  if (n > kMaxBytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "tag is longer than " + std::to_string(kMaxBytes) + " bytes");
  }
}

uint32_t intern(const char* text) {
  Table& t = table();
  std::string_view view(text);
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.ids.find(view);
  if (it != t.ids.end()) return it->second;
  const size_t cost = view.size() + 1 + kNodeOverhead;
  if (t.texts.size() >= kMaxTags || cost > kMaxTableBytes - t.bytes) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "too many distinct tags in this process (" + std::to_string(t.texts.size()) +
             " tags, " + std::to_string(t.bytes) +
             " bytes kept): tags are kept for the life of the process, so use a bounded set "
             "of names (module names, phases), not per-step or per-object text");
  }
  t.texts.emplace_back(view);
  const uint32_t id = static_cast<uint32_t>(t.texts.size());
  t.ids.emplace(std::string_view(t.texts.back()), id);
  t.bytes += cost;
  return id;
}

}  // namespace


void push(const char* text) {
  check_text(text);
  Stack* s = stack_or_null();
  if (s != nullptr && s->depth >= kMaxDepth) {
    fail(METRALE_ERROR_INVALID_ARGUMENT,
         "tag stack full: " + std::to_string(kMaxDepth) +
             " tags pushed on this thread and not popped (is a metrale_tag_pop missing?)");
  }
  const uint32_t id = intern(text);
  if (s == nullptr) {
    pthread_key_t* key = stack_key();
    if (key == nullptr) {
      fail(METRALE_ERROR_OUT_OF_MEMORY,
           "no thread-specific key is left for this thread's tag stack (the process holds "
           "PTHREAD_KEYS_MAX of them)");
    }
    s = static_cast<Stack*>(std::calloc(1, sizeof(Stack)));
    if (s == nullptr) throw std::bad_alloc();
    if (pthread_setspecific(*key, s) != 0) {
      std::free(s);
      throw std::bad_alloc();
    }
  }
  s->below[s->depth++] = t_current;
  t_current = id;
}

void pop() {
  Stack* s = stack_or_null();
  if (s == nullptr || s->depth == 0) {
    fail(METRALE_ERROR_INVALID_ARGUMENT, "no tag is pushed on this thread");
  }
  t_current = s->below[--s->depth];
}

size_t depth() noexcept {
  const Stack* s = stack_or_null();
  return s != nullptr ? s->depth : 0;
}

const char* name(uint32_t id) noexcept {
  if (id == 0) return nullptr;
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  return id <= t.texts.size() ? t.texts[id - 1].c_str() : nullptr;
}

uint32_t find(std::string_view text) noexcept {
  Table& t = table();
  std::lock_guard<std::mutex> lock(t.mutex);
  auto it = t.ids.find(text);
  return it != t.ids.end() ? it->second : 0;
}

}  // namespace metrale::core::tags
