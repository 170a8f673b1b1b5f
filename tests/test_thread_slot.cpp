// Thread slots (src/core/thread_slot.hpp) and the counter built on them
// (sharded_counter.hpp): threads alive at once never share a slot, a slot
// is given back at thread exit and taken again, threads beyond kSlots share
// the atomic line, and the counter is exact through all of it.
// Usage: test_thread_slot [CASE]
#include <pthread.h>
#include <sys/wait.h>
#include <unistd.h>

#include <set>
#include <thread>
#include <vector>

#include "core/sharded_counter.hpp"
#include "core/thread_slot.hpp"
#include "core_check.hpp"

using metrale::core::ShardedCounter;
using metrale::core::ThreadSlot;

namespace {

// Runs fn(i) on n threads that are all alive at once while fn runs.
template <class F>
void all_at_once(unsigned n, F fn) {
  pthread_barrier_t b;
  pthread_barrier_init(&b, nullptr, n);
  std::vector<std::thread> threads;
  for (unsigned i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      pthread_barrier_wait(&b);
      fn(i);
      pthread_barrier_wait(&b);  // nobody exits (gives its slot back) early
    });
  }
  for (auto& t : threads) t.join();
  pthread_barrier_destroy(&b);
}

void live_threads_have_their_own_slots() {
  const uint32_t main_slot = ThreadSlot::mine();
  CHECK(main_slot < ThreadSlot::kSlots);
  CHECK_EQ(ThreadSlot::mine(), main_slot);  // stable
  const unsigned n = ThreadSlot::kSlots + 6;  // more than there are slots
  std::vector<uint32_t> got(n);
  all_at_once(n, [&](unsigned i) { got[i] = ThreadSlot::mine(); });
  std::set<uint32_t> own;
  unsigned shared = 0;
  for (uint32_t s : got) {
    if (s == ThreadSlot::kShared) {
      ++shared;
    } else {
      CHECK(s < ThreadSlot::kSlots && s != main_slot);
      own.insert(s);
    }
  }
  CHECK_EQ(own.size(), size_t{ThreadSlot::kSlots - 1});  // all but main's, each once
  CHECK_EQ(shared, n - (ThreadSlot::kSlots - 1));
}

void slots_are_given_back_at_exit() {
  uint32_t first = ThreadSlot::kShared, second = ThreadSlot::kShared;
  std::thread([&] { first = ThreadSlot::mine(); }).join();
  std::thread([&] { second = ThreadSlot::mine(); }).join();
  CHECK(first < ThreadSlot::kSlots);
  CHECK_EQ(second, first);  // the lowest free slot, given back by the first
  // Every slot comes back: a full set can be taken again.
  std::vector<uint32_t> got(ThreadSlot::kSlots - 1);
  all_at_once(ThreadSlot::kSlots - 1, [&](unsigned i) { got[i] = ThreadSlot::mine(); });
  for (uint32_t s : got) CHECK(s < ThreadSlot::kSlots);
}

// A child of fork() has only the forking thread: the slots of the parent's
// other threads are free there, and taking one works (the lock is not left
// held by a thread the child does not have).
//
// The child's side, in a frame of its own: in the frame that called fork()
// (returns twice) GCC's UBSan build read the TLS slot through a null pointer.
[[gnu::noinline]] bool child_sees_free_slots(uint32_t main_slot) {
  // Every slot but this thread's is free: kSlots - 1 threads get one each.
  std::vector<uint32_t> got(ThreadSlot::kSlots - 1);
  all_at_once(ThreadSlot::kSlots - 1, [&](unsigned i) { got[i] = ThreadSlot::mine(); });
  bool own = ThreadSlot::mine() == main_slot;
  for (uint32_t s : got) own = own && s < ThreadSlot::kSlots && s != main_slot;
  return own;
}

void fork_child_frees_the_other_threads_slots() {
#if defined(__SANITIZE_THREAD__)
  // TSan ends a child that starts threads after a multi-threaded fork.
  std::printf("  skipped under TSan\n");
  return;
#endif
  const uint32_t main_slot = ThreadSlot::mine();
  pthread_barrier_t held, done;
  pthread_barrier_init(&held, nullptr, 2);
  pthread_barrier_init(&done, nullptr, 2);
  std::thread other([&] {
    ThreadSlot::mine();  // a slot held across the fork
    pthread_barrier_wait(&held);
    pthread_barrier_wait(&done);
  });
  pthread_barrier_wait(&held);
  // The answer comes through a pipe, not the exit status: under valgrind
  // the child's status is valgrind's (it reports the parent's thread as
  // leaked there).
  int answer[2] = {-1, -1};
  CHECK(pipe(answer) == 0);
  const pid_t pid = fork();
  if (pid == 0) {
    const char ok = child_sees_free_slots(main_slot) ? 1 : 0;
    const ssize_t wrote = write(answer[1], &ok, 1);
    _exit(wrote == 1 ? 0 : 1);
  }
  CHECK(pid > 0);
  close(answer[1]);
  char ok = 0;
  CHECK(read(answer[0], &ok, 1) == 1);
  CHECK(ok == 1);
  close(answer[0]);
  int status = -1;
  CHECK(waitpid(pid, &status, 0) == pid);
  pthread_barrier_wait(&done);
  other.join();
  pthread_barrier_destroy(&held);
  pthread_barrier_destroy(&done);
}

void counter_is_exact_across_threads() {
  ShardedCounter c;
  const unsigned n = ThreadSlot::kSlots + 6;
  const unsigned adds = 20000;
  all_at_once(n, [&](unsigned) {
    for (unsigned k = 0; k < adds; ++k) c.add();
  });
  CHECK_EQ(c.load(), uint64_t{n} * adds);
  // Threads on slots left by others continue their lines.
  all_at_once(8, [&](unsigned) { c.add(5); });
  CHECK_EQ(c.load(), uint64_t{n} * adds + 40);
  c.reset();
  CHECK_EQ(c.load(), uint64_t{0});
  c.add(3);
  std::thread([&] { c.add(4); }).join();
  CHECK_EQ(c.load(), uint64_t{7});
}

}  // namespace

int main(int argc, char** argv) {
  return core_check::run(argc, argv, {
      {"live_threads_have_their_own_slots", live_threads_have_their_own_slots},
      {"slots_are_given_back_at_exit", slots_are_given_back_at_exit},
      {"fork_child_frees_the_other_threads_slots", fork_child_frees_the_other_threads_slots},
      {"counter_is_exact_across_threads", counter_is_exact_across_threads},
  });
}
