/* The I/O threads: each worker is a libuv loop on its own thread that owns
 * the connections the accepting loop hands it. Everything a connection
 * does runs on its worker's thread: framing, reads (Get, Prefetch, List,
 * Stats, each with its own read transaction), replies, and the reply of a
 * write job, which the writer thread posts back to the worker
 * (docs/decisions.md #9). */
#ifndef PCD_WORKERS_H
#define PCD_WORKERS_H

#include <pthread.h>
#include <stdint.h>
#include <uv.h>

#include "bulk.h"
#include "common/queue.h"
#include "daemon.h"
#include "touch_set.h"
#include "writer.h"

typedef struct pcd_server pcd_server;
typedef struct pcd_conn pcd_conn;
typedef struct pcd_handoff pcd_handoff;

typedef struct pcd_worker {
  pcd_server *srv;
  uv_loop_t own_loop;
  uv_loop_t *loop;
  pthread_t thread;
  int has_thread;
  uv_async_t wake;        /* new fds, finished jobs, stop */
  uv_timer_t sweep_timer; /* frame timeouts and touch flushes */
  uv_timer_t bulk_timer;  /* parked connections (pcd_conn_owner.park) */
  uv_idle_t spin;         /* active: the loop polls without sleeping */
  uint64_t spin_until_us; /* until then (--busy-poll-us after a request) */
  uint64_t n_parked;
  unsigned bulk_checks; /* bulk timer fires since the last park */
  int sweep_started;
  /* Filled by other threads, under lock. */
  pthread_mutex_t lock;
  PCACHE_QUEUE(pcd_handoff) incoming;
  PCACHE_QUEUE(pcd_job) done;
  int stop_requested;
  /* This thread's alone. */
  int stopping;
  pcd_conn *conns;
  uint64_t n_conns;
  uint64_t inflight; /* jobs at the writer that will come back */
  uint64_t last_flush_us;
  pcd_touch_set touches; /* hits not yet written, one per entry */
  pcd_scratch scratch;   /* its connections' inline replies (bulk.h) */
} pcd_worker;

/* Sets a worker up on loop, or on a loop of its own when loop is NULL.
 * The fuzzers drive one on their loop without a thread. */
int pcd_worker_init(pcd_worker *w, pcd_server *srv, uv_loop_t *loop);
/* Starts its sweep timer and its thread (own loop only). */
int pcd_worker_start(pcd_worker *w);
/* Any thread: the worker takes over fd, a connection of peer pid. */
void pcd_worker_hand(pcd_worker *w, int fd, uint32_t pid);
/* Writer thread: a job of one of this worker's connections is done. */
void pcd_worker_post(pcd_worker *w, pcd_job *job);
/* Any thread: finish what is in flight (replies to write jobs), close
 * every connection, end the loop. */
void pcd_worker_request_stop(pcd_worker *w);
/* Waits for the thread, then frees what the worker holds. */
void pcd_worker_join(pcd_worker *w);

/*
 * pcd_workers_admit - whether a new connection of peer pid may be served,
 * open connections being open now (the accepting thread's count). At
 * --max-connections-per-process connections of pid, or --max-connections
 * in all, the oldest idle connection in the way (of pid, then of anyone;
 * idle: quiet for a second, pcd_conn.quiet_since_us) is handed to its
 * worker to close, and the newcomer admitted. Returns 0, or
 * PCACHE_ETOO_MANY_CONNECTIONS when none is idle (*ret_per_process 1 when
 * its process's bound refused it). The accepting thread.
 */
int pcd_workers_admit(pcd_server *srv, uint32_t pid, uint64_t open, int *ret_per_process);

/* The worker's thread only. */
/* A connection on fd of peer pid, owned and served by w from now on. 0 or
 * -errno. */
int pcd_worker_open_conn(pcd_worker *w, int fd, uint32_t pid, pcd_conn **ret_conn);
/* A connection waits for its client to take a reply memfd; while any
 * does, the bulk timer rechecks them every PCD_BULK_RECHECK_MS. */
#define PCD_BULK_RECHECK_MS 20
/* Records a hit for the next flush (merged with the entry's pending one). */
void pcd_worker_touch(pcd_worker *w, const uint8_t key[PCD_ENTRY_KEY_SIZE], uint64_t now_us);
/* Hands the pending touches to the writer (no-op when none). */
void pcd_worker_flush_touches(pcd_worker *w);

#endif
