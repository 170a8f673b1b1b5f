// The ledger-and-pool lock (src/core/fast_mutex.hpp) on its own: it
// excludes under contention, in its spinning and in its sleeping phase;
// an unlock wakes the threads that went to sleep on it; try_lock refuses
// while it is held. A waiter that is never woken fails the program after a
// deadline (the watchdog in main) instead of hanging the suite.
// Usage: test_fast_mutex [CASE]
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>
#include <vector>

#include "core/fast_mutex.hpp"
#include "core_check.hpp"

using metrale::core::FastMutex;

namespace {

// Two plain fields that only the lock keeps equal; the threads alternate
// short holds (the spin phase) with, now and then, a long one (the others
// sleep).
void excludes_under_contention() {
  FastMutex m;
  uint64_t a = 0, b = 0;
  bool torn = false;
  constexpr unsigned kThreads = 8;
  constexpr uint64_t kRounds = 20000;
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (uint64_t i = 0; i < kRounds; ++i) {
        std::lock_guard<FastMutex> lock(m);
        if (a != b) torn = true;
        ++a;
        if ((i + t) % 4096 == 0) std::this_thread::sleep_for(std::chrono::microseconds(500));
        ++b;
      }
    });
  }
  for (auto& th : threads) th.join();
  CHECK(!torn);
  CHECK_EQ(a, kThreads * kRounds);
  CHECK_EQ(b, kThreads * kRounds);
}

// Waiters that went to sleep (the lock held far beyond their spin) all get
// the lock once it is given back, each in turn.
void unlock_wakes_the_sleepers() {
  FastMutex m;
  constexpr unsigned kWaiters = 4;
  std::atomic<unsigned> started{0}, done{0};
  m.lock();
  std::vector<std::thread> threads;
  for (unsigned t = 0; t < kWaiters; ++t) {
    threads.emplace_back([&] {
      started.fetch_add(1);
      m.lock();
      done.fetch_add(1);
      m.unlock();
    });
  }
  while (started.load() < kWaiters) std::this_thread::yield();
  // Their spin is some tens of microseconds: after this they sleep. (300
  // ms, not less: on a loaded 2-core host a waiter may not run at all for
  // tens of ms, and one that never spun out proves nothing.)
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  CHECK_EQ(done.load(), 0u);
  m.unlock();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (done.load() < kWaiters && std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  CHECK_EQ(done.load(), kWaiters);  // else the watchdog ends the program
  for (auto& th : threads) th.join();
  CHECK(m.try_lock());
  m.unlock();
}

void try_lock_refuses_while_held() {
  FastMutex m;
  CHECK(m.try_lock());
  bool other = true;
  std::thread([&] { other = m.try_lock(); }).join();
  CHECK(!other);
  m.unlock();
  std::thread([&] {
    other = m.try_lock();
    if (other) m.unlock();
  }).join();
  CHECK(other);
}

}  // namespace

int main(int argc, char** argv) {
  // A sleeper that is never woken would hang the join: fail instead.
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::printf("  FAILED: still running after 20 s: a waiter was never woken\n");
    std::fflush(stdout);
    _exit(1);
  }).detach();
  return core_check::run(argc, argv, {
      {"excludes_under_contention", excludes_under_contention},
      {"unlock_wakes_the_sleepers", unlock_wakes_the_sleepers},
      {"try_lock_refuses_while_held", try_lock_refuses_while_held},
  });
}
