/* A preload for diagnosing a test that dies without output: cmocka turns a
 * signal or a failed assertion on a thread other than the test's into a
 * silent exit(-1). Preloaded (LD_PRELOAD=libcrashtrace.so), this keeps its
 * own handlers for SIGSEGV, SIGBUS, SIGILL, SIGFPE and SIGABRT (it ignores
 * cmocka's requests to replace them) and prints the faulting thread's
 * backtrace; a non-zero exit() prints the backtrace of its caller. Frames
 * inside shared libraries print as lib(+offset): addr2line -f -C -e lib
 * offset names them. Diagnosis only: never linked into anything. */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <execinfo.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static int traced(int sig) {
  return sig == SIGSEGV || sig == SIGBUS || sig == SIGILL || sig == SIGFPE || sig == SIGABRT;
}

static void dump(const char* why) {
  void* frames[64];
  int n = backtrace(frames, 64);
  dprintf(2, "\n=== crashtrace: %s (pid %d) ===\n", why, (int)getpid());
  backtrace_symbols_fd(frames, n, 2);
  dprintf(2, "=== maps ===\n");
  int fd = open("/proc/self/maps", 0);
  if (fd >= 0) {
    char buf[4096];
    ssize_t r;
    while ((r = read(fd, buf, sizeof buf)) > 0) (void)!write(2, buf, (size_t)r);
    close(fd);
  }
}

static void on_signal(int sig, siginfo_t* info, void* uc) {
  (void)uc;
  char why[128];
  snprintf(why, sizeof why, "signal %d at address %p", sig, info != NULL ? info->si_addr : NULL);
  dump(why);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void install(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  int (*real)(int, const struct sigaction*, struct sigaction*) =
      (int (*)(int, const struct sigaction*, struct sigaction*))dlsym(RTLD_NEXT, "sigaction");
  const int sigs[] = {SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT};
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; ++i) real(sigs[i], &sa, NULL);
}

typedef void (*handler_t)(int);

handler_t signal(int sig, handler_t h) {
  static handler_t (*real)(int, handler_t);
  if (real == NULL) real = (handler_t(*)(int, handler_t))dlsym(RTLD_NEXT, "signal");
  if (traced(sig)) return SIG_DFL; /* ours stays */
  return real(sig, h);
}

void exit(int status) {
  static void (*real)(int);
  if (real == NULL) real = (void (*)(int))dlsym(RTLD_NEXT, "exit");
  if (status != 0 && status != 77) {
    char why[64];
    snprintf(why, sizeof why, "exit(%d)", status);
    dump(why);
  }
  real(status);
  __builtin_unreachable();
}
