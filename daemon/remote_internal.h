/* What the fleet tier's files share (remote.h says who does what). They
 * call each other in this order only, lower to higher: remote_trust.c
 * (keys, signatures, the option files) <- remote_conn.c (the connection
 * and its state) <- remote_fetch.c (asks), remote_push.c (write-back) <-
 * remote.c (life, queues, deadlines). remote_conn.c reaches the others
 * through on_up. Everything here runs on the loop's thread unless it says
 * otherwise. */
#ifndef PCD_REMOTE_INTERNAL_H
#define PCD_REMOTE_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>

#include <hiredis/async.h>

#include "common/queue.h"
#include "remote.h"
#include "remote_trust.h"

typedef enum pcd_remote_state {
  PCD_REMOTE_DOWN,       /* waiting for the next try */
  PCD_REMOTE_CONNECTING, /* connecting, or AUTH / SELECT / PING on the way */
  PCD_REMOTE_UP,
  PCD_REMOTE_STOPPED,
} pcd_remote_state;

/* One Get's or Prefetch's question to the fleet. */
typedef struct pcd_ask {
  struct pcd_ask *next;
  pcd_remote *remote;
  pcd_job *job; /* NULL once answered */
  int prefetch, want_snapshot;
  uint8_t device_key[PCACHE_DEVKEY_SIZE];
  char app[PCD_MAX_APP + 1];
  uint8_t *hashes; /* n_hashes × 16: asked (Get), or those of the
                    * app's index this store lacks (Prefetch) */
  size_t n_hashes;
  /* The fetch, bounded in bytes (remote_fetch.c): each hash's value size
   * (STRLEN, 0 when absent), the STRLEN replies still due, the next hash
   * to ask, and the bytes asked for in all and not yet in. */
  uint64_t *sizes;
  size_t sizing, next_hash;
  uint64_t asked_bytes, flight_bytes;
  uint64_t deadline_us; /* monotonic */
  int outstanding;      /* commands whose callbacks are still due */
  /* What came back and passed the format checks: one Put of one item
   * per value, and the snapshot's PutSnapshot. */
  Pcachepb__Request **values;
  size_t n_values, values_size;
  Pcachepb__Request *snapshot;
} pcd_ask;

struct pcd_remote {
  const pcd_config *config;
  uv_loop_t *loop;
  pcd_store *store;
  pcd_writer *writer;
  pcd_stats *stats;
  pcd_job_done_cb done;
  /* Where: a TCP host and port, or a Unix socket path; the database. */
  char host[256];
  int port;
  char unix_path[108];
  unsigned db;
  char user[256], password[512]; /* from --remote-auth; password "" when none */
  /* Who signs and whom we trust (remote_trust.c); set before the loop
   * runs, read-only after. */
  pcd_trust trust;
  /* Refusals of fleet values by pcd_fleet_verdict, and REFUSED_FORMAT for
   * the rest (remote_fetch.c): logged at the 1st, 2nd, 4th, 8th... */
  uint64_t refusals[PCD_FLEET_BAD_SIGNATURE + 2];
  /* The connection (remote_conn.c). */
  redisAsyncContext *ac;
  _Atomic int state;       /* pcd_remote_state: read by other threads */
  uint64_t state_since_us; /* monotonic */
  /* The pause before the next try: doubled at each, back to the first
   * only once a connection did work (pcd_remote_worked), or stayed up
   * long: answering PING is not enough. */
  uint64_t backoff_ms;
  uint64_t last_progress_us; /* last bytes read, or reply (monotonic) */
  int commands;              /* sent, reply not yet seen */
  int ever_up, warned_down;
  int worked;   /* this connection answered a fetch or a write */
  int flapping; /* connections come up but fail before doing any work */
  uv_timer_t retry_timer;
  void (*on_up)(pcd_remote *remote); /* remote.c: push what waits */
  /* On the loop: asks sent to Redis, not yet answered. */
  pcd_ask *pending;
  uv_timer_t sweep_timer; /* deadlines and stalls */
  int sweeping;
  uint64_t push_bytes_in_flight;
  uv_async_t wake;
  /* Filled by other threads, under lock. */
  pthread_mutex_t lock;
  PCACHE_QUEUE(pcd_ask) asks;
  PCACHE_QUEUE(pcd_push) pushes;
  uint64_t queued, queued_bytes;
  char last_error[256];
  int stopped;
};

/* remote_conn.c */
/* Parses --remote into remote's host/port/db or unix_path; reads
 * --remote-auth. 0 or -EINVAL after logging why. */
int pcd_remote_parse(pcd_remote *remote);
/* Starts connecting now (from DOWN). */
void pcd_remote_connect(pcd_remote *remote);
/* Drops the connection (every pending callback runs with no reply) and
 * goes DOWN, retrying after the backoff unless stopping. */
void pcd_remote_drop(pcd_remote *remote, const char *why);
/* A command's reply: NULL when the connection went away first. */
typedef void (*pcd_remote_reply_fn)(pcd_remote *remote, redisReply *reply, void *privdata);
/* Sends a command (argv, binary-safe). fn runs exactly once, later, with
 * the reply or NULL. 0, or -EIO when the connection cannot take it (fn
 * will not run). */
int pcd_remote_command(pcd_remote *remote, pcd_remote_reply_fn fn, void *privdata, int argc,
                       const char **argv, const size_t *argv_len);
/* How long the remote may leave a command unanswered, or take to
 * connect, before the connection is dropped as stalled. */
uint64_t pcd_remote_stall_us(const pcd_remote *remote);
/* The most one reply from Redis may hold, parsed and not: more drops the
 * connection (remote_conn.c). */
uint64_t pcd_remote_reply_bound(const pcd_remote *remote);
/* The URL as given, for logs and Stats. */
const char *pcd_remote_url(const pcd_remote *remote);
/* A fetch or a write got its answer: the connection works, and the
 * backoff starts again from the first pause. */
void pcd_remote_worked(pcd_remote *remote);

/* remote_fetch.c */
/* Sends what an ask needs (or answers it at once when the remote is not
 * up). Takes the ask. */
void pcd_remote_fetch_start(pcd_remote *remote, pcd_ask *ask);
/* Answers every pending ask whose deadline is past now_us (all of them
 * with now_us UINT64_MAX). */
void pcd_remote_fetch_expire(pcd_remote *remote, uint64_t now_us);
/* Frees an ask never started (or already answered with no command due). */
void pcd_remote_ask_free(pcd_ask *ask);

/* remote_push.c */
/* Writes queued values while the connection is up and the bytes in flight
 * allow. */
void pcd_remote_push_flush(pcd_remote *remote);

#endif
