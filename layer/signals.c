/* Reports at SIGTERM and SIGINT. A program ended by either never runs its
 * destructors, so the layer's exit-time report (dispatch.c) would be lost.
 * The layer does not take the program's signal handling over: at the
 * first device it installs a handler only for a signal whose disposition
 * is still the default (a program with its own handler, or one that
 * ignores the signal, keeps it; a handler the program installs later
 * replaces ours). The handler does nothing that is unsafe in a signal
 * handler: it wakes a thread of the layer's (made at install, with every
 * signal blocked) that writes the reports as at exit, waits for it at
 * most PCACHE_LAYER_FLUSH_MS + 1 s, then puts the default back and raises
 * the signal again, so the program ends as it would have, by that signal.
 * A forked child (which has no such thread) goes straight to the default.
 * docs/layer.md, "Reports". */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <time.h>
#include <unistd.h>

#include "common/parse.h"
#include "layer/layer.h"

static pthread_once_t once = PTHREAD_ONCE_INIT;
static void (*_Atomic report_all)(void); /* the same function every call */
static int go_pipe[2] = {-1, -1}, done_pipe[2] = {-1, -1};
static pid_t owner;
static int wait_ms;
static atomic_int fired;
/* The reporter thread runs while the process has a device (watchers):
 * a thread left behind would outlive the program's use of Vulkan, and a
 * program that forks after it and starts threads in the child is then
 * the kind of program sanitizers refuse. */
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static unsigned watchers;
static pthread_t thread;
static atomic_int running;

static void *reporter_main(void *arg) {
  char c = 0;
  (void)arg;
  while (read(go_pipe[0], &c, 1) < 0 && errno == EINTR)
    ;
  if (c != 'x')
    return NULL; /* the last device went: told to end */
  atomic_load (&report_all)();
  (void)!write(done_pipe[1], "x", 1);
  return NULL;
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Only async-signal-safe calls: getpid, write, poll, clock_gettime,
 * sigaction, raise. */
static void on_signal(int sig) {
  int saved = errno;
  struct sigaction dfl = {.sa_handler = SIG_DFL};
  if (getpid() == owner && atomic_load(&running) && !atomic_exchange(&fired, 1) &&
      write(go_pipe[1], "x", 1) == 1) {
    int64_t end = now_ms() + wait_ms;
    for (;;) {
      struct pollfd p = {done_pipe[0], POLLIN, 0};
      int64_t left = end - now_ms();
      if (left <= 0 || poll(&p, 1, (int)left) != -1 || errno != EINTR)
        break;
    }
  }
  sigemptyset(&dfl.sa_mask);
  sigaction(sig, &dfl, NULL);
  /* Blocked while this handler runs: delivered, with its default action,
   * as the handler returns. */
  raise(sig);
  errno = saved;
}

static int make_pipe(int fds[2]) { return pipe2(fds, O_CLOEXEC); }

static void setup(void) {
  static const int sigs[] = {SIGTERM, SIGINT};
  if (make_pipe(go_pipe) < 0 || make_pipe(done_pipe) < 0)
    return;
  owner = getpid();
  wait_ms = (int)pcache__env_ms("PCACHE_LAYER_FLUSH_MS", 2000, 0, 600000) + 1000;
  for (size_t i = 0; i < sizeof sigs / sizeof sigs[0]; i++) {
    struct sigaction cur, ours = {.sa_handler = on_signal, .sa_flags = SA_RESTART};
    if (sigaction(sigs[i], NULL, &cur) < 0 || (cur.sa_flags & SA_SIGINFO) ||
        cur.sa_handler != SIG_DFL)
      continue; /* the program's own, or ignored: left alone */
    sigemptyset(&ours.sa_mask);
    sigaddset(&ours.sa_mask, SIGTERM);
    sigaddset(&ours.sa_mask, SIGINT);
    sigaction(sigs[i], &ours, NULL);
  }
}

/* The thread blocks every signal, so that it is never the one that runs
 * the handler (which waits for it). Under lock. */
static void start_reporter(void) {
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  if (pthread_create(&thread, NULL, reporter_main, NULL) == 0)
    atomic_store(&running, 1);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
}

void layer_signals_watch(void (*report)(void)) {
  atomic_store(&report_all, report);
  pthread_once(&once, setup);
  pthread_mutex_lock(&lock);
  /* A forked child shares the parent's pipes: it reports nothing at a
   * signal, as before the first device. */
  if (watchers++ == 0 && go_pipe[0] >= 0 && getpid() == owner)
    start_reporter();
  pthread_mutex_unlock(&lock);
}

void layer_signals_unwatch(void) {
  pthread_mutex_lock(&lock);
  if (watchers > 0 && --watchers == 0 && atomic_exchange(&running, 0) && getpid() == owner) {
    (void)!write(go_pipe[1], "q", 1);
    pthread_join(thread, NULL);
  }
  pthread_mutex_unlock(&lock);
}
