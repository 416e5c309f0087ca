/* pcache-replay's process helpers (docs/replay.md "The replayer", "Its
 * memory"): its priority (nice, SCHED_IDLE, idle I/O), its readings of
 * itself and the machine (resident memory, /proc/pressure/cpu and the PSI
 * thread that throttles the builds by it), the check of its memory
 * against the RLIMIT_DATA pcached sets, the fatal-signal handler that
 * tells a crash at that limit from the driver's own, its OOM score, and
 * the test-only hooks a build runs first.
 *
 * Its own file because it is the process's side, not the claim and build
 * loop's (replayer_worker.c) nor the program's start (replayer.c): both
 * of those call it, and it calls neither. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/hash.h"
#include "common/log.h"
#include "replay/replayer.h"

/* The test-only memory hog's steps and bound (PCACHE_REPLAY_TEST_HOG). */
#define HOG_STEP (16u << 20)
#define HOG_MAX (2048u << 20)

/* The lowest CPU and I/O priority there is for an unprivileged process;
 * none of it where the tests, on a loaded two-core machine, set
 * PCACHE_REPLAY_TEST_PRIORITY=normal: SCHED_IDLE gets no CPU while any
 * other task wants it, so a replay there could take any time. */
void pcache__replay_be_nice(void) {
  struct sched_param sp = {0};
  const char *v = getenv("PCACHE_REPLAY_TEST_PRIORITY");
  if (v && strcmp(v, "normal") == 0)
    return;
  if (setpriority(PRIO_PROCESS, 0, 19) < 0)
    log_debug("replay: setpriority: %s", strerror(errno));
  if (sched_setscheduler(0, SCHED_IDLE, &sp) < 0)
    log_debug("replay: SCHED_IDLE: %s", strerror(errno));
  /* ioprio_set(IOPRIO_WHO_PROCESS, 0, IOPRIO_CLASS_IDLE << 13): glibc has
   * no wrapper. */
  if (syscall(SYS_ioprio_set, 1, 0, 3 << 13) < 0)
    log_debug("replay: ioprio_set: %s", strerror(errno));
}

uint64_t pcache__replay_rss_bytes(void) {
  unsigned long size, resident;
  FILE *f = fopen("/proc/self/statm", "r");
  int ok;
  if (!f)
    return 0;
  ok = fscanf(f, "%lu %lu", &size, &resident) == 2;
  fclose(f);
  return ok ? (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE) : 0;
}

/* "some avg10=X" of /proc/pressure/cpu: the share of the last 10 s in
 * which some task waited for a CPU. -1 without PSI. */
static double cpu_pressure(void) {
  char line[256];
  double v = -1;
  FILE *f = fopen("/proc/pressure/cpu", "r");
  if (!f)
    return -1;
  while (fgets(line, sizeof line, f))
    if (strncmp(line, "some ", 5) == 0 && sscanf(line, "some avg10=%lf", &v) == 1)
      break;
  fclose(f);
  return v;
}

/* Every half second: from psi_low up, one build at a time, and after
 * each a pause that grows with the pressure (20 ms per point over the
 * threshold, at most 2 s). */
void *pcache__replay_psi_main(void *arg) {
  replayer *rp = arg;
  while (!atomic_load(&rp->stop) && !atomic_load(&rp->failed)) {
    double p = cpu_pressure();
    unsigned ms = 0;
    if (p >= rp->psi_low) {
      double d = (p - rp->psi_low) * 20 + 20;
      ms = d > 2000 ? 2000 : (unsigned)d;
    }
    atomic_store(&rp->throttle_ms, ms);
    atomic_store(&rp->pressured, ms > 0);
    {
      struct timespec until;
      pcache__timespec_in(CLOCK_MONOTONIC, 500, &until);
      pthread_mutex_lock(&rp->psi_lock);
      while (!rp->psi_stop &&
             pthread_cond_timedwait(&rp->psi_cond, &rp->psi_lock, &until) != ETIMEDOUT)
        ;
      pthread_mutex_unlock(&rp->psi_lock);
    }
  }
  return NULL;
}

/* Whether item's state hash, in hex (into hex), starts with prefix: the
 * test-only hooks' match (docs/replay.md). */
static int hook_matches(const char *prefix, const Pcachepb__ReplayItem *item, char hex[33]) {
  if (!prefix || item->state_hash.len != PCACHE_HASH_SIZE)
    return 0;
  pcache__hex(item->state_hash.data, PCACHE_HASH_SIZE, hex);
  return strncmp(hex, prefix, strlen(prefix)) == 0;
}

/* The test-only crash hook: dies on an item whose state hash, in hex,
 * starts with PCACHE_REPLAY_TEST_CRASH. */
static void maybe_crash(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  if (hook_matches(rp->crash_hash, item, hex)) {
    log_warn("replay: PCACHE_REPLAY_TEST_CRASH matches %s: aborting, as asked", hex);
    abort();
  }
}

/* The test-only self-kill hook: a driver that ends its process with
 * SIGKILL, on an item whose state hash, in hex, starts with
 * PCACHE_REPLAY_TEST_KILLSELF. */
static void maybe_kill_self(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  if (hook_matches(rp->killself_hash, item, hex)) {
    log_warn("replay: PCACHE_REPLAY_TEST_KILLSELF matches %s: killing this process, as asked", hex);
    raise(SIGKILL);
  }
}

/* The test-only hang hook: a driver that never returns, on an item whose
 * state hash, in hex, starts with PCACHE_REPLAY_TEST_HANG. */
static void maybe_hang(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  if (hook_matches(rp->hang_hash, item, hex)) {
    log_warn("replay: PCACHE_REPLAY_TEST_HANG matches %s: hanging, as asked", hex);
    for (;;)
      pause();
  }
}

/* The test-only memory hog, on an item whose state hash, in hex, starts
 * with PCACHE_REPLAY_TEST_HOG: a build that needs more memory than the
 * replayer may have. It allocates and touches HOG_STEP at a time, so that
 * the kernel's limit is what stops it, and aborts when an allocation
 * fails, as LLVM does (report_bad_alloc_error). Past HOG_MAX (no limit
 * stopped it) it lets the memory go and the build goes on. */
static void maybe_hog(const replayer *rp, const Pcachepb__ReplayItem *item) {
  char hex[33];
  void **chunks;
  size_t n = 0;
  if (!hook_matches(rp->hog_hash, item, hex))
    return;
  log_warn("replay: PCACHE_REPLAY_TEST_HOG matches %s: taking memory until refused, as asked", hex);
  if (!(chunks = calloc(HOG_MAX / HOG_STEP, sizeof *chunks)))
    abort();
  for (; n < HOG_MAX / HOG_STEP; n++) {
    if (!(chunks[n] = malloc(HOG_STEP)))
      abort();
    memset(chunks[n], 0xa5, HOG_STEP);
  }
  log_warn("replay: PCACHE_REPLAY_TEST_HOG took %u MiB and no limit stopped it",
           (unsigned)(HOG_MAX >> 20));
  while (n)
    free(chunks[--n]);
  free(chunks);
}

void pcache__replay_test_hooks(const replayer *rp, const Pcachepb__ReplayItem *item) {
  maybe_crash(rp, item);
  maybe_kill_self(rp, item);
  maybe_hang(rp, item);
  maybe_hog(rp, item);
}

/* Whether this process's private writable memory (VmData: what
 * RLIMIT_DATA counts) is within reach of the RLIMIT_DATA pcached set on
 * it: within an eighth of it, and 64 MiB at least, the most a failed
 * allocation of a driver is taken to have asked for. A crash or a failed
 * build there is the limit's doing. Async-signal-safe (the crash handler
 * calls it): system calls and plain loops only. */
int pcache__replay_near_memory_limit(void) {
  static const char field[] = "\nVmData:";
  char buf[4096];
  const char *p = NULL;
  struct rlimit rl;
  uint64_t kb = 0, limit, margin;
  size_t len = 0;
  ssize_t n;
  int fd;
  if (getrlimit(RLIMIT_DATA, &rl) < 0 || rl.rlim_cur == RLIM_INFINITY)
    return 0;
  if ((fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC)) < 0)
    return 0;
  while (len < sizeof buf - 1 && (n = read(fd, buf + len, sizeof buf - 1 - len)) > 0)
    len += (size_t)n;
  close(fd);
  buf[len] = '\0';
  for (size_t i = 0; !p && i + sizeof field - 1 <= len; i++)
    if (memcmp(buf + i, field, sizeof field - 1) == 0)
      p = buf + i + sizeof field - 1;
  if (!p)
    return 0;
  while (*p == ' ' || *p == '\t')
    p++;
  while (*p >= '0' && *p <= '9')
    kb = kb * 10 + (uint64_t)(*p++ - '0');
  limit = rl.rlim_cur;
  margin = limit / 8 > (64u << 20) ? limit / 8 : 64u << 20;
  return kb * 1024 + margin >= limit;
}

#if !defined(__SANITIZE_ADDRESS__) && !defined(__SANITIZE_THREAD__)
/* A crash at the memory limit (a driver that aborts, or dereferences the
 * NULL, when its allocation fails) exits EXIT_OUT_OF_MEMORY, for pcached
 * to tell it from a crash of the driver's own; any other crash goes on as
 * it would have (SA_RESETHAND: the default action, with its core dump). */
static void on_fatal_signal(int sig, siginfo_t *info, void *uctx) {
  static const char msg[] = "<3>pcache-replay: replay: a build ran out of memory under the "
                            "limit pcached set (PCACHE_REPLAY_MEM_LIMIT_MB); exiting\n";
  (void)uctx;
  if (pcache__replay_near_memory_limit()) {
    (void)!write(STDERR_FILENO, msg, sizeof msg - 1);
    _exit(EXIT_OUT_OF_MEMORY);
  }
  /* Sent (abort, kill): sent again, delivered once this returns; a fault
   * happens again when the instruction runs again. */
  if (info->si_code <= 0)
    raise(sig);
}
#endif

/* When the machine runs out of memory, the OOM killer takes the replayer
 * first, not a program of the user's: it holds nothing to lose (pcached
 * hands its items out again), and pcached blames an item that keeps
 * causing it. Raising one's own score needs no privilege. */
void pcache__replay_prefer_oom_kill(void) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "1000", 4) != 4)
    log_debug("replay: oom_score_adj: %s", strerror(errno));
  if (fd >= 0)
    close(fd);
}

void pcache__replay_catch_fatal_signals(void) {
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  /* The sanitizer's own handler reports the crash; no limit is set. */
#else
  static const int sigs[] = {SIGABRT, SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGTRAP};
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_sigaction = on_fatal_signal;
  sa.sa_flags = SA_SIGINFO | SA_RESETHAND;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < sizeof sigs / sizeof *sigs; i++)
    sigaction(sigs[i], &sa, NULL);
#endif
}
