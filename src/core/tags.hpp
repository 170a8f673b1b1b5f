// Allocation tags: a per-thread stack of labels (a model's module name, a
// phase of a program) that every ledger entry made on that thread carries.
// Tags are process-wide, not per context: the code that sets one (a
// PyTorch forward hook, say) does not know which device's context the
// allocation will land on. Each distinct text is interned once in a
// process-wide table and named by a small id (0 = untagged), so a ledger
// entry holds 4 bytes and reading the current tag is one thread-local load.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace metrale::core::tags {

namespace detail {
// current()'s value. Initial-exec TLS: reading it is one load off the thread
// pointer instead of a __tls_get_addr call (a shared library's default),
// which was a tenth of a pooled alloc+free pair's ledger work. 4 bytes of
// the static TLS surplus glibc keeps for dlopen'd libraries. Inline with
// its initializer, so no read checks for a TLS init function (thread_slot.hpp).
inline thread_local uint32_t t_current __attribute__((tls_model("initial-exec"))) = 0;
}  // namespace detail

// The innermost tag pushed on this thread (0: none). One thread-local load:
// the ledger calls it on every record.
inline uint32_t current() noexcept { return detail::t_current; }

// Pushes text (interned) as this thread's current tag. Throws
// INVALID_ARGUMENT for NULL, empty or over-long text, text with control
// bytes, a full stack (kMaxDepth) or a full table (kMaxTags distinct tags,
// kMaxTableBytes of text); nothing is pushed then.
void push(const char* text);
// Pops this thread's innermost tag; INVALID_ARGUMENT when none is pushed.
void pop();
// This thread's tag stack depth.
size_t depth() noexcept;

// The text of tag id (valid for the life of the process); nullptr for 0 or
// an id never issued.
const char* name(uint32_t id) noexcept;
// The id of text when it was ever pushed, else 0 (no interning).
uint32_t find(std::string_view text) noexcept;

constexpr size_t kMaxBytes = 256;          // one tag's text, NUL excluded
constexpr size_t kMaxDepth = 256;          // pushes per thread
constexpr size_t kMaxTags = 65536;         // distinct tags per process
constexpr size_t kMaxTableBytes = 4u << 20;  // their text, overhead included

}  // namespace metrale::core::tags
