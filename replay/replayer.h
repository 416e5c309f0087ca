/* What pcache-replay's files share (replayer.c, replayer_proc.c,
 * replayer_worker.c; docs/replay.md "The replayer"): the replayer's state,
 * a worker thread's, the exit codes, and the functions one file calls in
 * another. Internal to the pcache-replay program.
 *
 * The files call downwards only: replayer.c (main) calls the workers'
 * loop and the process helpers, replayer_worker.c calls the process
 * helpers, and replayer_proc.c calls neither (scripts/call-cycles.py). */
#ifndef PCACHE_REPLAY_REPLAYER_H
#define PCACHE_REPLAY_REPLAYER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"
#include "proto/transport.h"
#include "replay/uploader.h"
#include "replay_vk.h"

#define EXIT_NO_DEVICE 3
#define EXIT_RECYCLE 4
#define EXIT_OUT_OF_MEMORY 5
#define RPC_TIMEOUT_MS 30000

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

/* Results a thread has not reported yet: builds that failed (the
 * uploader reports what it sends). */
#define RESULTS_MAX 4
/* A result's message: room for a reason and its fix (pcached keeps 200
 * bytes of it, daemon/store/store_replay.h). */
#define RESULT_MSG_SIZE 200

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
  char result_msg[RESULTS_MAX][RESULT_MSG_SIZE];
} worker;

/* replayer_proc.c: the process and its surroundings. */

/* The lowest CPU and I/O priority there is for an unprivileged process
 * (none of it under PCACHE_REPLAY_TEST_PRIORITY=normal). */
void pcache__replay_be_nice(void);

/* This process's resident memory in bytes; 0 when unknown. */
uint64_t pcache__replay_rss_bytes(void);

/* The PSI thread (arg: the replayer): sets throttle_ms and pressured
 * every half second until stop, failed or psi_stop. */
void *pcache__replay_psi_main(void *arg);

/* The test-only hooks (PCACHE_REPLAY_TEST_CRASH, _KILLSELF, _HANG, _HOG),
 * in that order, on the item about to be built. */
void pcache__replay_test_hooks(const replayer *rp, const Pcachepb__ReplayItem *item);

/* Whether this process's VmData is within reach of its RLIMIT_DATA.
 * Async-signal-safe. */
int pcache__replay_near_memory_limit(void);

/* Makes this process the OOM killer's first choice. */
void pcache__replay_prefer_oom_kill(void);

/* A crash at the memory limit exits EXIT_OUT_OF_MEMORY; any other goes
 * on as it would have. Nothing under a sanitizer. */
void pcache__replay_catch_fatal_signals(void);

/* replayer_worker.c: a worker thread (arg: its worker), claiming and
 * building until the daemon has nothing more for it. */
void *pcache__replay_worker_main(void *arg);

#endif
