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

typedef struct pcd_sync pcd_sync;

/* One Get's or Prefetch's question to the fleet, or one slice of a sync
 * (remote_sync.c): an app's index read as a Prefetch's, its values
 * staged (Put.stage) rather than stored for a client. */
typedef struct pcd_ask {
  struct pcd_ask *next;
  pcd_remote *remote;
  pcd_job *job; /* NULL once answered */
  int prefetch, want_snapshot;
  /* A sync's slice: what it did is counted into sync->now too, and where
   * it got to noted in sync at its answer; of the index, only hashes
   * after `after` (when has_after), smallest first, at most slice of
   * them, are asked; values up to budget bytes in all (one larger
   * alone). */
  pcd_sync *sync;
  uint8_t after[PCACHE_HASH_SIZE];
  int has_after;
  size_t slice;
  uint64_t budget;
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

/* What a sync did (FleetSyncReply), loop thread only. */
typedef struct pcd_sync_counts {
  uint32_t devices, apps;
  uint64_t listed, fetched, staged, refused;
} pcd_sync_counts;

/* Most device keys a sync walks: what the probe of the installed drivers
 * reports at most (replay_detect.c: a key per device, and a binary key
 * per device with pipeline binaries). */
#define PCD_SYNC_MAX_DEVICES 32

/* The sync's state (remote_sync.c), on the loop's thread unless it says
 * otherwise. */
struct pcd_sync {
  /* Under remote->lock, from any thread: the installed devices' keys (the
   * last probe's), whether a sync is wanted, the FleetSync jobs that wait
   * for the next sync's end, and the conn-less Put jobs of the sync's
   * slices that the writer finished. */
  uint8_t keys[PCD_SYNC_MAX_DEVICES][PCACHE_DEVKEY_SIZE];
  unsigned n_keys;
  int wanted;
  PCACHE_QUEUE(pcd_job) waiters;
  PCACHE_QUEUE(pcd_job) landed;
  /* The sync under way (running is written under remote->lock, for
   * Stats), and the keys it walks. */
  int running;
  uint8_t run_keys[PCD_SYNC_MAX_DEVICES][PCACHE_DEVKEY_SIZE];
  unsigned key_at; /* the device being synced, in run_keys */
  uint8_t key[PCACHE_DEVKEY_SIZE];
  char scan_cursor[32];
  int scanning, scan_done;
  unsigned scans; /* SCAN calls for this device (SYNC_MAX_SCANS) */
  /* The apps found for the device, and the one being synced. */
  char (*apps)[PCD_MAX_APP + 1];
  size_t n_apps, app_at;
  uint8_t after[PCACHE_HASH_SIZE];
  int has_after;
  uint64_t app_listed;
  int at_writer; /* a slice is out: the next waits for it */
  /* The last slice's answer (remote_fetch.c): hashes listed, and how many
   * of them were asked (up to the last, which the next slice starts
   * after). */
  size_t slice_listed, slice_asked;
  uint8_t slice_last[PCACHE_HASH_SIZE];
  /* FleetSync jobs this sync answers: those that started it, and those
   * that came while it ran (joined). */
  PCACHE_QUEUE(pcd_job) riding, joining;
  pcd_sync_counts now;
  uint64_t started_us;
  /* The last sync's end, for Stats: under remote->lock. */
  pcd_sync_counts last;
  uint64_t last_ms, ended_us; /* monotonic */
  int ever, failed;
  char error[256];
};

struct pcd_remote {
  const pcd_config *config;
  uv_loop_t *loop;
  pcd_store *store;
  pcd_writer *writer;
  pcd_stats *stats;
  pcd_job_done_cb done;
  const pcd_job_hooks *put_hooks; /* every fleet Put job's hooks and ctx */
  void *put_ctx;                  /* (pcd_remote_new) */
  pcd_remote_exe_cb on_exe; /* a sync learned an app's program name */
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
  pcd_sync sync;
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

/* remote_sync.c */
/* On the loop: takes what waits (finished slices, new FleetSync jobs, a
 * wanted sync) and takes the sync's next step while the connection is
 * up. */
void pcd_remote_sync_run(pcd_remote *remote);
/* On the loop, while stopping: ends the sync, answering whoever waits. */
void pcd_remote_sync_stop(pcd_remote *remote);
/* Any thread: counts, taking ms, into reply (initialized here). */
void pcd_sync_counts_fill(Pcachepb__FleetSyncReply *reply, const pcd_sync_counts *counts,
                          uint64_t ms);

/* remote_push.c */
/* Writes queued values while the connection is up and the bytes in flight
 * allow. */
void pcd_remote_push_flush(pcd_remote *remote);

#endif
