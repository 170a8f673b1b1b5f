// Plain checks for the C++ suites of core classes (pool, staging, pinned
// cache, NVTX hooks): every failure prints its line and is counted; the
// runner runs the named case (or all), prints one line per case, and
// exits 1 when any check failed, 0 otherwise.
#pragma once

#include <atomic>
#include <cstdio>
#include <cstring>
#include <exception>
#include <functional>
#include <utility>
#include <vector>

namespace core_check {
inline std::atomic<int> failures{0};
}  // namespace core_check

#define CHECK(cond)                                                            \
  do {                                                                         \
    if (!(cond)) {                                                             \
      std::printf("  FAILED %s:%d: %s\n", __FILE__, __LINE__, #cond);          \
      core_check::failures.fetch_add(1);                                       \
    }                                                                          \
  } while (0)
#define CHECK_EQ(a, b)                                                         \
  do {                                                                         \
    const auto va_ = (a);                                                      \
    const auto vb_ = (b);                                                      \
    if (!(va_ == vb_)) {                                                       \
      std::printf("  FAILED %s:%d: %s == %s (%llu vs %llu)\n", __FILE__,       \
                  __LINE__, #a, #b, (unsigned long long)va_,                   \
                  (unsigned long long)vb_);                                    \
      core_check::failures.fetch_add(1);                                       \
    }                                                                          \
  } while (0)

namespace core_check {

using Cases = std::vector<std::pair<const char*, std::function<void()>>>;

// Runs the case named by argv[1], or every case; an exception fails it.
inline int run(int argc, char** argv, const Cases& cases) {
  int failed_cases = 0, ran = 0;
  for (const auto& c : cases) {
    if (argc > 1 && std::strcmp(argv[1], c.first) != 0) continue;
    ++ran;
    const int before = failures.load();
    std::printf("[ RUN  ] %s\n", c.first);
    try {
      c.second();
    } catch (const std::exception& e) {
      std::printf("  FAILED: exception: %s\n", e.what());
      failures.fetch_add(1);
    }
    const bool ok = failures.load() == before;
    failed_cases += !ok;
    std::printf("[ %s ] %s\n", ok ? " OK " : "FAIL", c.first);
  }
  if (ran == 0) {
    std::printf("no case named %s\n", argc > 1 ? argv[1] : "");
    return 1;
  }
  std::printf("%d of %d cases failed\n", failed_cases, ran);
  return failed_cases == 0 ? 0 : 1;
}

}  // namespace core_check
