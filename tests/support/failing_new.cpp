// The program's global operator new, with a countdown: the n-th allocation
// the arming thread makes from now on throws std::bad_alloc. The library
// takes operator new from the program (ELF interposition: it is an undefined
// symbol of libmetrale_gpu.so), so a suite can make each allocation a call
// makes fail in turn and check that the call fails cleanly or succeeds.
// Per thread: other threads' allocations (a host kernel's, a logger's) are
// never counted.
#include <cstdlib>
#include <new>

#include "failing_new.h"

namespace {
thread_local long t_countdown = 0;  // 0: off
}

extern "C" void mt_fail_new_after(long n) { t_countdown = n > 0 ? n : 0; }

extern "C" long mt_fail_new_left(void) { return t_countdown; }

extern "C" int mt_fail_new_works(void) {
  // Through a volatile pointer: the call is made, not folded away.
  void* (*volatile make)(std::size_t) = &::operator new;
  t_countdown = 1;
  try {
    ::operator delete(make(8));
  } catch (const std::bad_alloc&) {
    return 1;  // the countdown is 0 again
  }
  t_countdown = 0;
  return 0;
}

void* operator new(std::size_t n) {
  if (t_countdown > 0 && --t_countdown == 0) throw std::bad_alloc();
  void* p = std::malloc(n != 0 ? n : 1);
  if (p == nullptr) throw std::bad_alloc();
  return p;
}

void* operator new[](std::size_t n) { return ::operator new(n); }

// Over-aligned types (the handle tables' 64-byte slots) come through these.
void* operator new(std::size_t n, std::align_val_t a) {
  if (t_countdown > 0 && --t_countdown == 0) throw std::bad_alloc();
  const std::size_t align = static_cast<std::size_t>(a);
  void* p = nullptr;
  if (posix_memalign(&p, align < sizeof(void*) ? sizeof(void*) : align, n != 0 ? n : 1) != 0)
    throw std::bad_alloc();
  return p;
}

void* operator new[](std::size_t n, std::align_val_t a) { return ::operator new(n, a); }

void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
void operator delete(void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::align_val_t) noexcept { std::free(p); }
void operator delete(void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept { std::free(p); }
