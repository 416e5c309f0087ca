/* The writer thread: owns every write transaction. Jobs queued while a
 * commit runs go into the next one together (group commit), so a Put is
 * acknowledged only after the commit that holds it, and many concurrent
 * Puts cost one fsync. Results go back through a callback that wakes the
 * I/O thread of the job's connection. */
#ifndef PCD_WRITER_H
#define PCD_WRITER_H

#include <uv.h>

#include "common/arena.h"
#include "bulk.h"
#include "daemon.h"

typedef enum pcd_job_type {
  PCD_JOB_PUT,
  PCD_JOB_REPORT,
  PCD_JOB_PURGE,
  PCD_JOB_VERIFY,
  PCD_JOB_EXPORT,
  PCD_JOB_IMPORT,
  PCD_JOB_SNAPSHOT,      /* PutSnapshot */
  PCD_JOB_SNAPSHOT_DROP, /* the snapshot of (device_key, app) failed its
                          * checksum: no reply */
  PCD_JOB_TOUCH,         /* touches: last-used/hit batch, no reply */
  PCD_JOB_DROP,          /* touches[].key: entries that failed their checksum, no reply */
  PCD_JOB_REPLAY_START,  /* ReplayStart, or a client's new device key (replay.h) */
  PCD_JOB_REPLAY_CLAIM,  /* ReplayClaim */
  PCD_JOB_REPLAY_SYNC,   /* the replay's bad records, eviction, next replay; no reply */
  PCD_JOB_APP_EXE,       /* app runs as exe (replay_exe.c); no reply */
} pcd_job_type;

typedef struct pcd_job_ops pcd_job_ops;
typedef struct pcd_job pcd_job;
struct pcd_remote;
struct pcd_push;
struct pcache__devkey;

/* What a Put does for the replay (docs/replay.md), which lives in a room
 * above this one: whoever makes a Put job installs them, with the
 * replay as job->ctx (dispatch.c for clients, remote_job.c for the
 * fleet's, both as main.c hands them the replay's table), the way
 * job->push carries the fleet's push; so ops_put.c names no function of
 * the replay. job->hooks NULL (a job without a replay): the Put stages
 * nothing and lands nothing. */
typedef struct pcd_job_hooks {
  /* Any thread: whether the job may file staged items (Put.stage): the
   * replayer that builds them is there. */
  int (*stages)(const pcd_job *job);
  /* In the Put's run, once it filed staged items under the staged key of
   * key, added of them new entries there (an item staged again is
   * filed but adds none): plans their build. Returns 0 or a code that
   * spoils the transaction. */
  int (*stage)(pcd_job *job, pcd_txn *txn, const struct pcache__devkey *key, uint64_t added);
  /* At the end of the Put's run: the results of the replayer's own Put
   * land (its items in flight are done, or bad). */
  void (*landed)(pcd_job *job, const Pcachepb__Put *put, const Pcachepb__PutReply *reply);
  /* The Put's transaction committed (1) or aborted (0): stage's and
   * landed's hold on the replay ends; a commit that staged wakes the
   * replayer. */
  void (*settled)(pcd_job *job, int committed);
} pcd_job_hooks;

struct pcd_job {
  struct pcd_job *next;
  pcd_job_type type;
  const pcd_job_ops *ops;                 /* what the type does (jobs.h) */
  Pcachepb__Request *req;                 /* owned; freed with the job */
  char app[PCD_MAX_APP + 1];              /* the connection's Hello app */
  uint32_t peer_pid;                      /* the connection's pid (SO_PEERCRED), 0 without one */
  uint8_t device_key[PCACHE_DEVKEY_SIZE]; /* SNAPSHOT_DROP: whose snapshot */
  char exe[PCD_EXE_NAME_MAX + 1];         /* APP_EXE: the program name app runs as */
  void *conn;                             /* a pcd_conn; NULL when no reply is wanted */
  void *ctx;                              /* REPLAY_* and hooks: the pcd_replay (replay.h) */
  const pcd_job_hooks *hooks;             /* PUT: the replay's, or NULL (above) */
  void *owner;                            /* a job without conn but with finish: whose
                                           * it is (remote_sync.c: the pcd_remote) */
  /* On the connection's I/O thread, once the writer is done with a job
   * that has a conn: sends its reply and frees it. Set by whoever
   * submitted it (dispatch.c), so the worker that runs it need not know
   * the request kinds. A job without conn whose finish is set gets
   * it called instead, on the thread that finished it (the writer's, or
   * the loop's), and finish owns it then. */
  void (*finish)(struct pcd_job *job);
  pcd_touch *touches; /* owned (TOUCH, DROP) */
  size_t n_touches;
  /* The fleet tier (remote.h). fleet: the job stores what the fleet sent
   * (counted apart, never pushed back); held: the Get or Prefetch it will
   * answer then (owned). remote: where a client's Put or PutSnapshot is
   * pushed after its commit, through push (pcd_remote_push, installed by
   * dispatch.c, so that the ops, which the remote's jobs reach, need not
   * call it); pushes: the values packed for it. */
  int fleet;
  Pcachepb__Request *held;
  struct pcd_remote *remote;
  void (*push)(struct pcd_remote *remote, struct pcd_push *list);
  struct pcd_push *pushes;
  /* PUT: it filed staged items and planned their build (ops_put.c): the
   * replayer is woken once it commits. */
  int staged;
  /* REPLAY_START with detect: what the probe found (replay_detect.c),
   * owned (freed with __free_unpacked), for the reply the run makes. */
  Pcachepb__ReplayStartReply *detected;
  /* Filled by the writer thread. */
  void *slices;         /* a request done in slices (Import): its
                         * state between them, owned */
  int more;             /* set by the op: more slices to run */
  uint32_t slice_items; /* an alone job's items per slice (jobs.h) */
  pcache__arena arena;
  Pcachepb__Response resp;
  uint64_t stored, rejected, evicted;
  pcd_out out; /* the encoded reply, when conn is set */
};

typedef struct pcd_writer pcd_writer;
/* Called on the writer thread for each finished job, which it then owns
 * (free with pcd_job_free): it hands a reply back to the I/O thread that
 * owns the job's connection (workers.h). */
typedef void (*pcd_job_done_cb)(pcd_job *job);

int pcd_writer_start(pcd_store *store, const pcd_config *config, pcd_stats *stats,
                     pcd_job_done_cb done, pcd_writer **ret_writer);
pcd_job *pcd_job_new(pcd_job_type type);
void pcd_job_free(pcd_job *job);
/* Any thread. */
void pcd_writer_submit(pcd_writer *writer, pcd_job *job);
/* Finishes every queued job (its result goes through done), joins the
 * thread and frees the writer. Nothing may be submitted after it starts. */
void pcd_writer_stop(pcd_writer *writer);

#endif
