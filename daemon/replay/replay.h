/* Replay (docs/replay.md): when a client names a device key that
 * supersedes one the store holds (same vendor, device and ABI; another
 * driver version or cache UUID), pcached rebuilds the old key's pipelines
 * for the new key in the background, through pcache-replay, a separate
 * process it starts and supervises, so that a driver crash or hang costs
 * only that process and the pipeline it was on.
 *
 * The files, each calling only those after it:
 *   replay_detect.c     the drivers installed (pcache-replay --list-keys),
 *                       each key noted as a client's (replay_detect.h)
 *   replay_supervise.c  the replayer process: start, exit, hang watch,
 *                       and the triggers (a client naming a new key);
 *                       restart (the accepting loop's thread)
 *   replay_exe.c        the program name an app runs as (its clients'
 *                       executable, or the fleet's), and the replayer's
 *                       copies under those names
 *   replay_new.c        making it: the settings, the writer jobs' tables,
 *                       a Put's hooks
 *   ops_replay*.c       the writer jobs: ReplayStart (finding replays),
 *                       ReplayClaim (handing out items, taking results),
 *                       the sync job (bad records, the old key's eviction);
 *                       ops_replay.h says which file has which
 *   replay.c            the state they share: the replay under way, its
 *                       order, the items in flight, progress for Stats
 *   store_replay.c      the records in the store (store_replay.h) */
#ifndef PCD_REPLAY_H
#define PCD_REPLAY_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <uv.h>

#include "common/arena.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "proto/pcache.pb-c.h"
#include "store_replay.h"
#include "writer.h"

/* Items handed out and not yet landed: a replayer thread has up to three
 * (one it builds, one it claimed meanwhile, one at its uploader), and
 * pcache-replay caps its --threads at 16. */
#define PCD_REPLAY_MAX_INFLIGHT 48
/* Items to hand out again, one at a time, after a replayer died with more
 * than one in flight (which of them killed it is not known). */
#define PCD_REPLAY_MAX_RETRY PCD_REPLAY_MAX_INFLIGHT
/* Device keys this run has seen a client name (the cheap test before a
 * look at the store for a superseded key). */
#define PCD_REPLAY_MAX_SEEN 64
/* Bad-pipeline records waiting for the writer. */
#define PCD_REPLAY_MAX_PENDING_BAD 8
/* Replayer exits in a row without an item done before replay gives up
 * (until the next ReplayStart or a restart of pcached). */
#define PCD_REPLAY_MAX_FAILURES 5
/* The replayer's exit codes (replay/replayer.h says the same). */
#define PCD_REPLAY_EXIT_NO_DEVICE 3     /* no Vulkan device has the new key */
#define PCD_REPLAY_EXIT_RECYCLE 4       /* it grew past its memory bound: start afresh */
#define PCD_REPLAY_EXIT_OUT_OF_MEMORY 5 /* its build ran into its memory limit */
/* Times an item is handed out again, alone, after it ran the replayer out
 * of memory; when the last of them runs out too, it is recorded as bad.
 * Not at once: memory the rest of the machine took (the OOM killer picks
 * the largest process) is not the item's doing every time. */
#define PCD_REPLAY_OOM_RETRIES 2

typedef struct pcd_replay_flight {
  pcache__hash hash;
  uint64_t started_us; /* pcache__mono_us */
} pcd_replay_flight;

typedef struct pcd_replay_bad {
  uint8_t old_key[PCACHE_DEVKEY_SIZE], new_key[PCACHE_DEVKEY_SIZE];
  pcache__hash hash;
  char reason[PCD_REPLAY_REASON_MAX + 1]; /* all the store keeps: a reason and its fix */
} pcd_replay_bad;

/* What the writer's jobs change in step with the store. The first replay
 * job of a transaction takes replay->lock and keeps it to the commit or
 * the abort (pcd_replay_txn_enter, _leave), with a copy of this saved
 * first: a transaction that aborts (a full map, retried after eviction;
 * another job's failure) puts it back, so that the state never runs ahead
 * of what the store committed. Nothing else changes it meanwhile: every
 * other writer of it takes replay->lock. */
typedef struct pcd_replay_state {
  /* The replay under way (active), loaded from its record. */
  int active;
  pcd_replay_record rec;
  uint64_t done, failed, total;   /* live counts */
  uint64_t done_at_load, load_us; /* for the ETA (pcache__mono_us) */
  /* The order: an app that is running now first (boost), then app by app,
   * most recently used first (found through the LRU index newest first). */
  char boost_app[201];
  int boost, boost_has_after;
  pcache__hash boost_after;
  uint64_t boost_seq; /* the last foreground note taken up (pcd_replay_fg) */
  char cur_app[201];
  int cur, cur_has_after;
  pcache__hash cur_after;
  uint8_t lru_before[PCD_LRU_KEY_SIZE];
  int lru_has_before;
  pcd_replay_flight flight[PCD_REPLAY_MAX_INFLIGHT];
  unsigned n_flight;
  pcache__hash retry[PCD_REPLAY_MAX_RETRY];
  unsigned n_retry;
  int retry_in_flight; /* a retried item is out: hand out nothing else */
  pcd_replay_bad pending_bad[PCD_REPLAY_MAX_PENDING_BAD];
  unsigned n_pending_bad, n_bad_written; /* written: the first n, this transaction */
  int finished_now;                      /* the replay just finished: evict and go on (sync job) */
  char paused[32];
  uint64_t busy_grant_us; /* the last item handed out while a client was busy */
  uint8_t last_new_key[PCACHE_DEVKEY_SIZE];
  int have_last_new_key;
} pcd_replay_state;

/* What clients do (pcd_replay_note, on I/O threads), under its own lock
 * so that a Get never waits for the writer's transaction. */
typedef struct pcd_replay_fg {
  pthread_mutex_t lock;
  /* Foreground pipeline work: pipelines asked for or uploaded per second,
   * decaying with the time constant quiet_us, as of last_us. */
  double rate;
  uint64_t last_us;
  /* The app a client runs on a key now, to go first; seq counts notes. */
  char app[201];
  uint8_t key[PCACHE_DEVKEY_SIZE];
  uint64_t seq;
  uint8_t seen[PCD_REPLAY_MAX_SEEN][PCACHE_DEVKEY_SIZE];
  unsigned n_seen;
} pcd_replay_fg;

/* Program names recorded this run (replay_exe.c), so that each client's
 * Hello costs a look here, not a write. */
#define PCD_REPLAY_MAX_EXES 64
typedef struct pcd_replay_exes {
  pthread_mutex_t lock;
  struct {
    char app[PCD_MAX_APP + 1];
    char exe[PCD_EXE_NAME_MAX + 1];
  } v[PCD_REPLAY_MAX_EXES];
  unsigned n, next;
} pcd_replay_exes;

typedef struct pcd_replay {
  pthread_mutex_t lock;
  struct pcd_server *srv;
  pcd_replay_state st;
  /* The writer thread's own: the lock is held for a transaction, and st
   * as it was when the transaction's first replay job ran. */
  int txn_held;
  pcd_replay_state saved;
  /* The replayer process (replay_supervise.c, accepting loop). */
  uv_loop_t *loop;
  uv_process_t proc;
  uv_timer_t watch;    /* hang watch while it runs; restart delay */
  uv_async_t wake;     /* another thread wants a start or a sync */
  struct relay *relay; /* the replayer's stderr, read into pcached's log */
  int handles_ready, running, closing;
  int want_spawn, want_sync;
  uint64_t spawn_after_ms; /* uv_now of the loop: a restart's pause lasts until then */
  int hang_kill;
  pcache__hash hang_hash;
  uint32_t pid;
  unsigned landed;          /* results the running replayer reported */
  atomic_uint replayer_pid; /* pid while running, else 0: read without the lock */
  unsigned failures_in_row, restarts;
  /* The item that ran the replayer out of memory while out alone, and how
   * many times in a row (up to PCD_REPLAY_OOM_RETRIES). */
  pcache__hash oom_hash;
  unsigned oom_strikes;
  /* The OOM killer's count (oom_path) when the replayer started: a SIGKILL
   * after it rose was the OOM killer's. */
  uint64_t oom_kills_at_spawn;
  char oom_path[4096];
  int gave_up;
  char gave_up_why[128];
  /* New keys whose replayer found no device with them this run (a staged
   * build for a driver replaced since, or an update undone): their replays
   * wait, and the next pending one is loaded instead (load_next), so that
   * one missing device holds no other replay back. A client that names the
   * key, `pcachectl replay` or a restart tries them again. A loaded replay
   * whose key is among them is started no replayer and the next sync job
   * unloads it. Past the bound the oldest is forgotten and its replayer
   * starts again, one after another for as long as more targets than
   * this have no device: 64 (2 KiB) is more device models than a machine
   * sees, and a key named retires the pending replays to its device's
   * other builds (ops_replay_start.c), so each model leaves one such
   * target at most. */
#define PCD_REPLAY_NO_DEVICE_MAX 64
  uint8_t no_device[PCD_REPLAY_NO_DEVICE_MAX][PCACHE_DEVKEY_SIZE];
  unsigned n_no_device;
  /* The new key the running (or last) replayer was started for: its exit
   * speaks for that key, and the replay loaded by then may be another
   * (a sync job loads the next one while it still runs). */
  uint8_t spawned_key[PCACHE_DEVKEY_SIZE];
  pcd_replay_fg fg;
  /* Builds under the program's name (replay_exe.c, docs/replay.md): on
   * unless PCACHE_REPLAY_AS_PROGRAM=0, and off for the rest of the run once
   * a copy cannot be made or started. exe_name: the name the running
   * replayer was started under ("": pcache-replay's own); next_exe: the
   * name the next one starts under, as the next item needs (ops_replay.c);
   * switching: the running one was told to finish for another name. */
  atomic_int as_program;
  char exe_name[PCD_EXE_NAME_MAX + 1];
  char next_exe[PCD_EXE_NAME_MAX + 1];
  int switching;
  pcd_replay_exes exes;
  /* Settings (environment, read once; docs/replay.md). */
  char replayer_path[4096];
  unsigned threads;
  uint64_t quiet_us, hang_us, busy_every_us;
  uint64_t mem_limit_mb; /* the replayer's RLIMIT_DATA; 0: none */
  double busy_rate;
  int disabled;
  /* Whether Put.stage is taken (pcd_replay_stages): replay is on and the
   * replayer is there to be started. */
  int stages;
} pcd_replay;

/* Makes the state; reads the settings; sets the tables of the replay's
 * writer jobs (ops_replay*.c: pcd_job_ops_set, so before any thread makes
 * one). Returns 0 or -errno. */
int pcd_replay_new(struct pcd_server *srv, pcd_replay **ret_replay);
void pcd_replay_free(pcd_replay *replay);

/* Any thread: whether this pcached builds staged items (Put.stage,
 * HelloReply.stages; docs/replay.md "Staged builds"): replay is not off
 * (PCACHE_REPLAY=off) and its replayer can be started. replay may be
 * NULL (a job with no replay: no). */
int pcd_replay_stages(const pcd_replay *replay);

/* Any I/O thread: a client (pid from its Hello) named device_key in a
 * Get, Prefetch or Put as app, for `pipelines` pipelines (the hashes a
 * Get asks for, the items a Put uploads, 1 for a Prefetch). Cheap when
 * the key was seen before; a new key queues a ReplayStart job that looks
 * for a key it supersedes. Never waits for the writer. */
void pcd_replay_note(pcd_replay *replay, const uint8_t *device_key, size_t key_len, const char *app,
                     uint32_t pid, size_t pipelines);

/* Under replay->fg.lock: adds a client's note (pcd_replay_note) to the
 * foreground rate and the app to go first. */
void pcd_replay_fg_note(pcd_replay *replay, const uint8_t *device_key, const char *app,
                        size_t pipelines, uint64_t now_us);
/* Under replay->lock: whether clients are busy with pipelines now (their
 * rate at or above busy_rate), and takes up the app a client runs on the
 * replay's new key (it goes first). */
int pcd_replay_fg_busy(pcd_replay *replay, uint64_t now_us);

/* Writer thread, in a replay job's run: holds replay->lock until
 * pcd_replay_txn_leave, saving the state first (once per transaction). */
void pcd_replay_txn_enter(pcd_replay *replay);
/* Writer thread, from a replay job's committed (1) or aborted (0) hook:
 * lets the lock go; an abort puts the saved state back. */
void pcd_replay_txn_leave(pcd_replay *replay, int committed);

/* What a Put does for the replay (writer.h pcd_job_hooks; replay_new.c),
 * with the pcd_replay as job->ctx: main.c hands it to the makers of Put
 * jobs (the server's router, the fleet). stages: pcd_replay_stages.
 * stage: once a Put stored items under the staged key of key
 * (pcache__devkey_staged), plans the replay staged(key) -> key, taken up
 * again when it finished before, and loads it unless another replay is
 * under way; its replayer is started once the Put commits (settled, as
 * job->staged says). landed: the replayer's own Put lands its items at
 * once, stored as done, refused as bad, as the report in its next claim
 * would; so an item is in flight only while it is built or uploaded, and
 * a crash or hang of the next build is blamed on that build alone; any
 * other client's Put passes without the lock. settled:
 * pcd_replay_txn_leave when stage or landed entered. */
extern const pcd_job_hooks pcd_replay_job_hooks;

/* On the accepting loop (replay_supervise.c): makes its handles and
 * queues the job that takes up a replay the last run left pending.
 * Returns 0 or -errno. */
int pcd_replay_start(pcd_replay *replay, uv_loop_t *loop);
/* After the loop stopped: ends the replayer (SIGTERM) and closes the
 * handles. */
void pcd_replay_stop(pcd_replay *replay);

/* Any thread: an Import may bring entries of a key that the keys seen
 * so far supersede, so each is looked at again when next named. */
void pcd_replay_forget_keys(pcd_replay *replay);

/* Under replay->lock. */
int pcd_replay_in_flight(const pcd_replay *replay, const pcache__hash *hash);
/* Takes hash out of the items in flight; returns whether it was there. */
int pcd_replay_land(pcd_replay *replay, const pcache__hash *hash);
/* Queues a bad-pipeline record for the writer (dropped past the bound:
 * the item is then simply tried again by the next replayer). */
void pcd_replay_queue_bad(pcd_replay *replay, const pcache__hash *hash, const char *reason);
/* Forgets the replay under way (its order, its flight). */
void pcd_replay_unload(pcd_replay *replay);
/* Under the lock: no device here has key (no_device). */
void pcd_replay_no_device(pcd_replay *replay, const uint8_t *key);
/* Under the lock: whether key is one of them. */
int pcd_replay_device_missing(const pcd_replay *replay, const uint8_t *key);

/* Stats: the progress of the replay under way and the records of the
 * others, read through txn (a read transaction), into arena. Returns 0,
 * -ENOMEM or PCACHE_ESTORE. */
int pcd_replay_progress(pcd_replay *replay, pcd_txn *txn, pcache__arena *arena,
                        Pcachepb__ReplayProgress ***ret_items, size_t *ret_n);

#endif
