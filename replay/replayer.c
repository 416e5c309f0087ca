/* pcache-replay: rebuilds stored pipelines for a new driver (docs/replay.md).
 * pcached starts it with the new device key and supervises it; it asks the
 * daemon for one item at a time per thread (ReplayClaim, which also reports
 * a build that failed; the daemon lands an uploaded item as it stores it:
 * so it knows which item a crash interrupted), builds it on the device (replay_vk.c, the thread's
 * shader modules kept across items in module_pool.c), and hands the blob to the uploader
 * (uploader.c), which sends it in a batched ordinary Put, validated by the daemon as any other,
 * while the thread builds its next item.
 *
 * It keeps out of the user's way: nice 19, SCHED_IDLE, idle I/O class, at
 * most --threads builds at once (16) with one upload each behind them, one
 * build at a time with a pause after each while /proc/pressure/cpu says
 * tasks wait for a CPU, and none while the daemon says a client is busy.
 * Its memory is one item per thread (and its last blob, at the uploader);
 * when the driver's own grows past PCACHE_REPLAY_MAX_RSS_MB it reports
 * what it did and exits between items, and pcached starts a fresh one.
 * That is a recycle threshold; the hard bound is the RLIMIT_DATA pcached
 * sets on it (PCACHE_REPLAY_MEM_LIMIT_MB): a build that runs into it (a
 * crash, or a failed build, with its memory at the limit) exits 5, and
 * pcached blames the item once it does so alone.
 *
 * Exit codes: 0 done (nothing left to hand out), 1 error, 2 usage,
 * 3 no Vulkan device has the key, 4 memory bound reached (recycle),
 * 5 out of memory under the limit. */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/clock.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/log.h"
#include "common/parse.h"
#include "common/paths.h"
#include "proto/transport.h"
#include "replay/uploader.h"
#include "replay_vk.h"

#define EXIT_NO_DEVICE 3
#define EXIT_RECYCLE 4
#define EXIT_OUT_OF_MEMORY 5
/* The test-only memory hog's steps and bound (PCACHE_REPLAY_TEST_HOG). */
#define HOG_STEP (16u << 20)
#define HOG_MAX (2048u << 20)
#define MAX_THREADS 16
#define RPC_TIMEOUT_MS 30000
/* Each thread's modules across items (module_pool.h): an app's shaders
 * are a few dozen at most, PBR SPIR-V tens of KB each. */
#define POOL_MODULES 64
#define POOL_BYTES (32u << 20)

typedef struct replayer {
  const char *socket_path;
  pcache__devkey key;
  pcache__replay_vk *vk;
  pcache__replay_keep *keep; /* built pipelines kept alive a while (keep.h) */
  unsigned threads;
  uint64_t max_rss;
  double psi_low;            /* avg10 % from which builds are throttled */
  atomic_uint throttle_ms;   /* the pause after each build; 0: none */
  atomic_int pressured;      /* threads past the first wait */
  atomic_int stop;           /* memory bound reached: report and exit */
  atomic_int out_of_memory;  /* a build ran into the memory limit */
  atomic_int failed;         /* a thread lost its connection */
  atomic_int finished;       /* the daemon has nothing more to hand out */
  const char *crash_hash;    /* test hook: PCACHE_REPLAY_TEST_CRASH */
  const char *killself_hash; /* test hook: PCACHE_REPLAY_TEST_KILLSELF */
  const char *hang_hash;     /* test hook: PCACHE_REPLAY_TEST_HANG */
  const char *hog_hash;      /* test hook: PCACHE_REPLAY_TEST_HOG */
  uint32_t delay_ms;         /* test hook: PCACHE_REPLAY_TEST_DELAY_MS */
  atomic_ullong built;
  pcache__replay_uploader *uploader;
  /* Wakes the PSI thread at the end, not half a second later. */
  pthread_mutex_t psi_lock;
  pthread_cond_t psi_cond; /* CLOCK_MONOTONIC */
  int psi_stop;            /* under psi_lock */
} replayer;

static void sleep_ms(uint32_t ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
    ;
}

/* The lowest CPU and I/O priority there is for an unprivileged process;
 * none of it where the tests, on a loaded two-core machine, set
 * PCACHE_REPLAY_TEST_PRIORITY=normal: SCHED_IDLE gets no CPU while any
 * other task wants it, so a replay there could take any time. */
static void be_nice(void) {
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

static uint64_t rss_bytes(void) {
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
static void *psi_main(void *arg) {
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

/* Results a thread has not reported yet: builds that failed (the
 * uploader reports what it sends). */
#define RESULTS_MAX 4

typedef struct worker {
  replayer *rp;
  unsigned index;
  pthread_t thread;
  pcache__transport *t;
  int done;
  pcache__module_pool *modules; /* this thread's, across items */
  pcache__replay_times times;
  uint64_t claim_ns, wait_ns, slept_ns, items;
  /* Shared with the uploader's thread, under lock. */
  pthread_mutex_t lock;
  pthread_cond_t cond;
  unsigned outstanding; /* items at the uploader: at most 1 (its blob's memory) */
  int uploaded;         /* an upload since the thread last found itself done */
  size_t n_results;
  uint8_t result_hash[RESULTS_MAX][PCACHE_HASH_SIZE];
  int result_status[RESULTS_MAX];
  char result_msg[RESULTS_MAX][160];
} worker;

/* Under w->lock. A result past RESULTS_MAX cannot happen (a claim
 * reports each before the next item comes); were it to, the item stays in
 * flight at the daemon and is handed out again after this replayer. */
static void add_result(worker *w, const uint8_t *hash, int status, const char *msg) {
  size_t i = w->n_results;
  if (i == RESULTS_MAX)
    return;
  memcpy(w->result_hash[i], hash, PCACHE_HASH_SIZE);
  w->result_status[i] = status;
  snprintf(w->result_msg[i], sizeof w->result_msg[i], "%s", msg ? msg : "");
  w->n_results++;
}

/* The uploader's thread: an item of w's is stored, or refused (and
 * reported either way). */
static void upload_done(void *ctx, int status) {
  worker *w = ctx;
  if (status == 0)
    atomic_fetch_add(&w->rp->built, 1);
  pthread_mutex_lock(&w->lock);
  w->outstanding--;
  pthread_cond_broadcast(&w->cond);
  pthread_mutex_unlock(&w->lock);
}

/* Waits until w has no more than max items at the uploader. */
static void wait_uploads(worker *w, unsigned max) {
  uint64_t t0 = pcache__mono_ns();
  pthread_mutex_lock(&w->lock);
  while (w->outstanding > max)
    pthread_cond_wait(&w->cond, &w->lock);
  pthread_mutex_unlock(&w->lock);
  w->wait_ns += pcache__mono_ns() - t0;
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

/* Whether this process's private writable memory (VmData: what
 * RLIMIT_DATA counts) is within reach of the RLIMIT_DATA pcached set on
 * it: within an eighth of it, and 64 MiB at least, the most a failed
 * allocation of a driver is taken to have asked for. A crash or a failed
 * build there is the limit's doing. Async-signal-safe (the crash handler
 * calls it): system calls and plain loops only. */
static int near_memory_limit(void) {
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
  if (near_memory_limit()) {
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
static void prefer_oom_kill(void) {
  int fd = open("/proc/self/oom_score_adj", O_WRONLY | O_CLOEXEC);
  if (fd < 0 || write(fd, "1000", 4) != 4)
    log_debug("replay: oom_score_adj: %s", strerror(errno));
  if (fd >= 0)
    close(fd);
}

static void catch_fatal_signals(void) {
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

static void build_item(worker *w, const Pcachepb__ReplayItem *item) {
  replayer *rp = w->rp;
  uint8_t *blob = NULL;
  size_t size = 0;
  uint64_t ns = 0;
  char msg[160];
  int r;
  maybe_crash(rp, item);
  maybe_kill_self(rp, item);
  maybe_hang(rp, item);
  maybe_hog(rp, item);
  if (rp->delay_ms)
    sleep_ms(rp->delay_ms);
  w->items++;
  r = pcache__replay_vk_build(rp->vk, w->modules, rp->keep, item->desc.data, item->desc.len,
                              item->modules, item->n_modules, item->seed.data, item->seed.len,
                              &blob, &size, &ns, &w->times);
  if (r == 0) {
    /* The previous item's Put had this build's time to land. */
    wait_uploads(w, 0);
    pthread_mutex_lock(&w->lock);
    w->outstanding++;
    pthread_mutex_unlock(&w->lock);
    r = pcache__replay_uploader_queue(rp->uploader, item, blob, size, ns, upload_done, w);
    if (r == 0) {
      w->uploaded = 1;
      return;
    }
    snprintf(msg, sizeof msg, "upload failed: %s", pcache_strerror(r));
    pthread_mutex_lock(&w->lock);
    w->outstanding--;
    add_result(w, item->state_hash.data, r, msg);
    pthread_mutex_unlock(&w->lock);
    return;
  }
  pcache__free(blob);
  if (r == -ENOMEM && near_memory_limit()) {
    /* Not reported: the item stays out, and pcached blames it once it
     * does this alone (other threads' builds took memory beside it). */
    log_error("replay: a build ran out of memory under the limit pcached set "
              "(PCACHE_REPLAY_MEM_LIMIT_MB); exiting");
    atomic_store(&rp->out_of_memory, 1);
    atomic_store(&rp->stop, 1);
    return;
  }
  snprintf(msg, sizeof msg, "build failed: %s", pcache_strerror(r));
  pthread_mutex_lock(&w->lock);
  add_result(w, item->state_hash.data, r, msg);
  pthread_mutex_unlock(&w->lock);
}

/* One ReplayClaim: reports the results gathered so far and leaves the
 * daemon's answer in *reply (released by the caller in every case). When
 * build is not NULL, that item is built while the daemon answers: the
 * claim's round trip (a writer job, which may wait behind a Put's
 * commit) is then off the build path. Returns 0 or a failure of the
 * exchange (the item is built all the same). */
static int claim(worker *w, int last, const Pcachepb__ReplayItem *build, pcache__reply *reply) {
  replayer *rp = w->rp;
  Pcachepb__Request req = PCACHEPB__REQUEST__INIT;
  Pcachepb__ReplayClaim c = PCACHEPB__REPLAY_CLAIM__INIT;
  Pcachepb__ReplayResult results[RESULTS_MAX], *ptrs[RESULTS_MAX];
  uint8_t hashes[RESULTS_MAX][PCACHE_HASH_SIZE];
  char msgs[RESULTS_MAX][160];
  uint64_t t0, t1 = 0, t2 = 0;
  size_t n;
  int r;
  *reply = (pcache__reply){0};
  pthread_mutex_lock(&w->lock);
  n = w->n_results;
  for (size_t i = 0; i < n; i++) {
    pcachepb__replay_result__init(&results[i]);
    memcpy(hashes[i], w->result_hash[i], PCACHE_HASH_SIZE);
    memcpy(msgs[i], w->result_msg[i], sizeof msgs[i]);
    results[i].state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, hashes[i]};
    results[i].status = w->result_status[i];
    results[i].message = msgs[i];
    ptrs[i] = &results[i];
  }
  w->n_results = 0;
  pthread_mutex_unlock(&w->lock);
  c.new_key.data = rp->key.bytes;
  c.new_key.len = PCACHE_DEVKEY_SIZE;
  c.results = n ? ptrs : NULL;
  c.n_results = n;
  c.last = last;
  req.body_case = PCACHEPB__REQUEST__BODY_REPLAY_CLAIM;
  req.replay_claim = &c;
  t0 = pcache__mono_ns();
  r = pcache__transport_send(w->t, &req, pcache__mono_ms() + RPC_TIMEOUT_MS);
  if (build) {
    t1 = pcache__mono_ns();
    build_item(w, build);
    t2 = pcache__mono_ns();
  }
  if (r == 0)
    r = pcache__transport_recv(w->t, PCACHEPB__RESPONSE__BODY_REPLAY_CLAIM,
                               pcache__mono_ms() + RPC_TIMEOUT_MS, reply);
  w->claim_ns += pcache__mono_ns() - t0 - (t2 - t1);
  if (r < 0)
    log_error("replay: claim: %s", pcache__reply_why(reply, r));
  return r;
}

/* What a claim's answer asks of the thread. Returns the item to build
 * next (valid until reply is released), or NULL. */
static const Pcachepb__ReplayItem *take_answer(worker *w, int last, const pcache__reply *reply) {
  replayer *rp = w->rp;
  const Pcachepb__ReplayClaimReply *cr = reply->response->replay_claim;
  if (cr->item && !last)
    return cr->item;
  if (cr->finished || last) {
    w->done = 1;
    if (cr->finished)
      atomic_store(&rp->finished, 1);
  } else if (cr->wait_ms) {
    uint64_t t0 = pcache__mono_ns();
    sleep_ms(cr->wait_ms);
    w->slept_ns += pcache__mono_ns() - t0;
  }
  return NULL;
}

static int has_results(worker *w) {
  int n;
  pthread_mutex_lock(&w->lock);
  n = w->n_results != 0;
  pthread_mutex_unlock(&w->lock);
  return n;
}

/* A thread: claims and builds until the daemon has nothing more for it.
 * It holds at most one item it has not built (the answer to a claim sent
 * while it built the last one). Under CPU pressure or a throttle it
 * claims only when it has nothing to build: one build at a time, and a
 * pause after each. */
static void *worker_main(void *arg) {
  worker *w = arg;
  replayer *rp = w->rp;
  pcache__reply held = {0}; /* the answer holding the next item */
  const Pcachepb__ReplayItem *next = NULL;
  for (;;) {
    pcache__reply reply;
    int r;
    if (w->done && !next) {
      /* Nothing more for this thread: its last upload ends first, and
       * a result not yet reported goes to the daemon (which may then
       * hand out more: a retry). The daemon ends the replay at a claim
       * that finds nothing left and nothing out: after this thread's
       * last upload has landed, it asks once more. */
      wait_uploads(w, 0);
      if (!has_results(w) && !w->uploaded)
        break;
      w->uploaded = 0;
      w->done = 0;
    }
    if (pcache__replay_uploader_broken(rp->uploader))
      atomic_store(&rp->failed, 1); /* as a claim that lost the daemon */
    if (atomic_load(&rp->failed))
      break;
    if (atomic_load(&rp->stop) || (rp->max_rss && rss_bytes() > rp->max_rss)) {
      /* An item held and not built stays in flight: handed out again. */
      atomic_store(&rp->stop, 1);
      wait_uploads(w, 0);
      if (claim(w, 1, NULL, &reply) == 0)
        w->done = 1;
      pcache__reply_release(&reply);
      break;
    }
    /* Under CPU pressure one thread builds, with a pause after each. */
    if (!next && w->index > 0 && atomic_load(&rp->pressured)) {
      if (atomic_load(&rp->finished)) {
        w->done = 1; /* its last upload, if any, is reported above */
        continue;
      }
      sleep_ms(500);
      continue;
    }
    if (next && (atomic_load(&rp->pressured) || atomic_load(&rp->throttle_ms) || w->done)) {
      /* Build what it holds, and claim (if at all) only after. */
      build_item(w, next);
      pcache__reply_release(&held);
      next = NULL;
    } else {
      const Pcachepb__ReplayItem *build = next;
      r = claim(w, 0, build, &reply);
      if (build) {
        pcache__reply_release(&held);
        next = NULL;
      }
      if (r < 0) {
        pcache__reply_release(&reply);
        atomic_store(&rp->failed, 1);
        break;
      }
      if ((next = take_answer(w, 0, &reply)) != NULL)
        held = reply;
      else
        pcache__reply_release(&reply);
      if (!build)
        continue;
    }
    if (atomic_load(&rp->throttle_ms))
      sleep_ms(atomic_load(&rp->throttle_ms));
  }
  pcache__reply_release(&held);
  return NULL;
}

/* Where the items' time went, summed over the threads, per item: what
 * bench/run-replay.sh reports beside the rate. The uploads overlap the
 * builds; "wait" is what a thread waited for its last one. */
static void log_times(const worker *workers, unsigned n, pcache__replay_keep *keep, uint64_t put_ns,
                      uint64_t puts) {
  pcache__replay_times t = {0};
  uint64_t claim = 0, wait = 0, slept = 0, items = 0, made = 0, lent = 0;
  unsigned kept, kept_peak;
  struct rusage ru;
  for (unsigned i = 0; i < n; i++) {
    uint64_t m, l;
    t.decode_ns += workers[i].times.decode_ns;
    t.objects_ns += workers[i].times.objects_ns;
    t.compile_ns += workers[i].times.compile_ns;
    t.data_ns += workers[i].times.data_ns;
    t.seeded += workers[i].times.seeded;
    claim += workers[i].claim_ns;
    wait += workers[i].wait_ns;
    slept += workers[i].slept_ns;
    items += workers[i].items;
    pcache__module_pool_counts(workers[i].modules, &m, &l);
    made += m;
    lent += l;
  }
  if (!items)
    return;
  pcache__replay_keep_counts(keep, &kept, &kept_peak);
  /* The process's page faults and context switches: set beside a
   * program's (pcache-demo --plain prints its own), they tell a compile
   * slowed by its memory or its scheduling from one slowed by its work. */
  if (getrusage(RUSAGE_SELF, &ru) < 0)
    memset(&ru, 0, sizeof ru);
#define PER(ns) ((double)(ns) / 1e6 / (double)items)
  log_info("replay: per item (ms): claim %.3f decode %.3f objects %.3f compile %.3f data %.3f "
           "wait %.3f upload %.3f told_to_wait %.3f; puts %llu, modules made %llu, reused %llu, "
           "kept %u, rss_mb %llu, minor_faults %ld, voluntary_switches %ld, "
           "involuntary_switches %ld",
           PER(claim), PER(t.decode_ns), PER(t.objects_ns), PER(t.compile_ns), PER(t.data_ns),
           PER(wait), PER(put_ns), PER(slept), (unsigned long long)puts, (unsigned long long)made,
           (unsigned long long)(lent - made), kept_peak, (unsigned long long)(rss_bytes() >> 20),
           ru.ru_minflt, ru.ru_nvcsw, ru.ru_nivcsw);
#undef PER
  /* Staged items that came with a blob (docs/replay.md "Staged builds"). */
  if (t.seeded)
    log_info("replay: %llu builds started from a seed", (unsigned long long)t.seeded);
}

static int usage(FILE *f, int code) {
  fprintf(f, "usage: pcache-replay --device KEY [--socket PATH] [--threads N]\n"
             "       pcache-replay --list-keys\n"
             "Rebuilds the pipelines pcached hands out for the device KEY (64 hex digits).\n"
             "--list-keys prints each Vulkan device's key as a client on it computes it,\n"
             "then its name, driver name and driver info, tab-separated, and builds\n"
             "nothing (exit 3: no device). pcached starts both; see docs/replay.md.\n");
  return code;
}

/* --list-keys: pcached's probe of the drivers installed (daemon/replay_detect.c),
 * at the replayer's priority. */
static int list_keys(void) {
  int r;
  be_nice();
  if ((r = pcache__replay_vk_list(stdout)) == PCACHE_ENOT_FOUND) {
    log_info("replay: no Vulkan device here");
    return EXIT_NO_DEVICE;
  }
  if (r < 0)
    log_error("replay: cannot list the Vulkan devices: %s", pcache_strerror(r));
  return r < 0 ? 1 : 0;
}

/* The file name NVIDIA's driver files its disk cache under (the basename
 * of /proc/self/exe): pcached starts a copy named as the program whose
 * pipelines it builds (docs/replay.md "Builds under the program's name"),
 * and its log says which. */
static void say_name(void) {
  char exe[4096];
  ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
  const char *slash;
  exe[n > 0 ? n : 0] = '\0';
  slash = strrchr(exe, '/');
  log_info("replay: runs as '%s'", slash ? slash + 1 : exe);
}

int main(int argc, char **argv) {
  static replayer rp;
  worker *workers = NULL;
  pthread_t psi;
  char sock[4096];
  const char *device = NULL, *socket_arg = NULL, *v;
  unsigned started = 0;
  uint64_t t0, elapsed_us, put_ns = 0, puts = 0;
  int r, code = 1, psi_started = 0;
  unsigned keep_max, keep_mb;

  pcache__log_set_ident("pcache-replay");
  /* pcached starts and supervises the replayer: once pcached is gone
   * (killed -9 included), one stuck in its driver must not live on, nor
   * one whose parent died before this line. */
  pid_t parent = getppid();
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) == 0 && getppid() != parent)
    return 1;
  rp.threads = 1;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0)
      return usage(stdout, 0);
    if (strcmp(argv[i], "--list-keys") == 0 && argc == 2)
      return list_keys();
    if (i + 1 >= argc)
      return usage(stderr, 2);
    if (strcmp(argv[i], "--device") == 0)
      device = argv[++i];
    else if (strcmp(argv[i], "--socket") == 0)
      socket_arg = argv[++i];
    else if (strcmp(argv[i], "--threads") == 0)
      rp.threads = (unsigned)atoi(argv[++i]);
    else
      return usage(stderr, 2);
  }
  if (!device || pcache__devkey_parse(device, &rp.key) < 0 || rp.threads < 1 ||
      rp.threads > MAX_THREADS)
    return usage(stderr, 2);
  if ((r = pcache__socket_path(socket_arg, sock, sizeof sock)) < 0) {
    log_error("replay: no socket path: %s", strerror(-r));
    return 1;
  }
  rp.socket_path = sock;
  say_name();
  rp.max_rss = (uint64_t)pcache__env_ms("PCACHE_REPLAY_MAX_RSS_MB", 1024, 16, 1u << 20) << 20;
  rp.psi_low = pcache__env_ms("PCACHE_REPLAY_PSI", 10, 1, 100);
  rp.delay_ms = pcache__env_ms("PCACHE_REPLAY_TEST_DELAY_MS", 0, 0, 60000);
  keep_max = (unsigned)pcache__env_ms("PCACHE_REPLAY_KEEP", 1024, 0, 65536);
  keep_mb = (unsigned)pcache__env_ms("PCACHE_REPLAY_KEEP_MB", 128, 1, 4096);
  /* The driver's own disk cache stays on: each pipeline the replayer
   * builds for a new driver is then in that cache too, so the first launch
   * after the update finds it there through driver first (client/build.c)
   * as a warm launch would. On the H200 that launch was 1.21 times a warm
   * one with it on and 1.56 with it off (bench/RESULTS.md, "Driver first").
   * PCACHE_REPLAY_DRIVER_CACHE=0 turns it off for the replayer (NVIDIA's
   * __GL_SHADER_DISK_CACHE=0, set before the loader loads the driver,
   * while this process has one thread), as it was before: unless no
   * pipeline is kept, since then the disk cache is what lets the driver
   * share compiled stages between pipelines (keep.h). */
  v = getenv("PCACHE_REPLAY_DRIVER_CACHE");
  if (keep_max && v && strcmp(v, "0") == 0)
    setenv("__GL_SHADER_DISK_CACHE", "0", 1);
  v = getenv("PCACHE_REPLAY_TEST_CRASH");
  rp.crash_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_KILLSELF");
  rp.killself_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_HANG");
  rp.hang_hash = v && *v ? v : NULL;
  v = getenv("PCACHE_REPLAY_TEST_HOG");
  rp.hog_hash = v && *v ? v : NULL;
  catch_fatal_signals();
  prefer_oom_kill();
  be_nice();

  if ((r = pcache__replay_vk_open(&rp.key, &rp.vk)) < 0 && near_memory_limit()) {
    log_error("replay: the Vulkan driver ran out of memory under the limit pcached set "
              "(PCACHE_REPLAY_MEM_LIMIT_MB) as it loaded");
    return EXIT_OUT_OF_MEMORY;
  }
  if (r < 0) {
    log_error("replay: no Vulkan device for key %s: %s", device, pcache_strerror(r));
    return r == PCACHE_ENOT_FOUND ? EXIT_NO_DEVICE : 1;
  }
  if (pcache__replay_keep_new(pcache__replay_vk_device(rp.vk), keep_max, (size_t)keep_mb << 20,
                              &rp.keep) < 0) {
    log_error("replay: out of memory for %u kept pipelines", keep_max);
    goto out_vk;
  }
  if ((r = pcache__replay_uploader_start(rp.socket_path, RPC_TIMEOUT_MS,
                                         pcache__replay_vk_info(rp.vk), &rp.uploader)) < 0) {
    log_error("replay: cannot reach pcached at %s: %s", rp.socket_path, pcache_strerror(r));
    goto out_vk;
  }
  if (!(workers = pcache__calloc(rp.threads, sizeof *workers)))
    goto out_uploader;
  for (unsigned i = 0; i < rp.threads; i++) {
    workers[i].rp = &rp;
    workers[i].index = i;
    pthread_mutex_init(&workers[i].lock, NULL);
    pthread_cond_init(&workers[i].cond, NULL);
    if (pcache__module_pool_new(pcache__replay_vk_device(rp.vk), POOL_MODULES, POOL_BYTES,
                                &workers[i].modules) < 0)
      goto out_workers;
    r = pcache__transport_open(rp.socket_path, "pcache-replay", RPC_TIMEOUT_MS, &workers[i].t,
                               NULL);
    if (r < 0) {
      log_error("replay: cannot reach pcached at %s: %s", rp.socket_path, pcache_strerror(r));
      goto out_workers;
    }
  }
  t0 = pcache__mono_us();
  {
    pthread_condattr_t attr;
    pthread_condattr_init(&attr);
    pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
    pthread_cond_init(&rp.psi_cond, &attr);
    pthread_condattr_destroy(&attr);
    pthread_mutex_init(&rp.psi_lock, NULL);
  }
  psi_started = pthread_create(&psi, NULL, psi_main, &rp) == 0;
  for (started = 0; started < rp.threads; started++)
    if (pthread_create(&workers[started].thread, NULL, worker_main, &workers[started]) != 0)
      break;
  for (unsigned i = 0; i < started; i++)
    pthread_join(workers[i].thread, NULL);
  elapsed_us = pcache__mono_us() - t0;
  atomic_store(&rp.failed, 1); /* ends the PSI thread */
  pthread_mutex_lock(&rp.psi_lock);
  rp.psi_stop = 1;
  pthread_cond_signal(&rp.psi_cond);
  pthread_mutex_unlock(&rp.psi_lock);
  if (psi_started)
    pthread_join(psi, NULL);
  pthread_cond_destroy(&rp.psi_cond);
  pthread_mutex_destroy(&rp.psi_lock);
  /* The replay benchmark (bench/run-replay.sh) reads this line. */
  log_info("replay: built %llu pipelines in %.1f ms with %u threads",
           (unsigned long long)atomic_load(&rp.built), (double)elapsed_us / 1e3, rp.threads);
  /* What a thread that failed left queued is sent (its results are not
   * reported: the daemon hands those items out again, and skips them
   * when their Put had landed). */
  pcache__replay_uploader_stop(rp.uploader, &put_ns, &puts);
  rp.uploader = NULL;
  log_times(workers, started, rp.keep, put_ns, puts);
  code = atomic_load(&rp.out_of_memory) ? EXIT_OUT_OF_MEMORY
         : atomic_load(&rp.stop)        ? EXIT_RECYCLE
         : started == rp.threads        ? 0
                                        : 1;
  for (unsigned i = 0; i < started; i++)
    if (!workers[i].done && !atomic_load(&rp.stop))
      code = 1;
out_workers:
  pcache__replay_uploader_stop(rp.uploader, NULL, NULL); /* before the workers it calls back */
  rp.uploader = NULL;
  for (unsigned i = 0; i < rp.threads; i++) {
    pcache__transport_close(workers[i].t);
    pcache__module_pool_free(workers[i].modules);
    pthread_cond_destroy(&workers[i].cond);
    pthread_mutex_destroy(&workers[i].lock);
  }
  pcache__free(workers);
out_uploader:
  pcache__replay_uploader_stop(rp.uploader, NULL, NULL);
out_vk:
  pcache__replay_keep_free(rp.keep);
  pcache__replay_vk_close(rp.vk);
  return code;
}
