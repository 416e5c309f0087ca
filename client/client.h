/* The client (client.c): the process's connections to pcached, shared by
 * every device context, and the one way the library talks to the daemon
 * (pcache__client_rpc). */
#ifndef PCACHE_CLIENT_CLIENT_H
#define PCACHE_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pcache/pcache.h>

#include "client/log.h"
#include "proto/transport.h"

/* Which connection a call takes. The app's calls (Gets, prefetch pages)
 * are reads an app thread waits on, or must stay on the connection that
 * began them (a prefetch's later pages, which the upload thread fetches,
 * continue the daemon's cursor there); the upload threads' writes (Puts,
 * snapshots, used lists, reports of refused blobs and snapshots) wait for a commit,
 * which a busy disk can hold for hundreds of milliseconds. Each has a
 * connection of its own, so a slow write never holds a Get behind it or
 * makes it time out. */
typedef enum pcache__lane_id {
  PCACHE__LANE_APP = 0,
  PCACHE__LANE_BACKGROUND = 1,
  PCACHE__LANE_COUNT
} pcache__lane_id;

/* A call from an upload thread gets this many times the client's
 * timeout: nobody waits on it, and pcache_device_destroy cancels one in
 * flight, or waiting for its lane (pcache__rpc_set_cancel_fd). */
#define PCACHE__BACKGROUND_TIMEOUT_FACTOR 10u

typedef struct pcache__lane {
  pthread_mutex_t lock; /* guards the fields below */
  pcache__transport *transport;
  uint64_t last_attempt_ms; /* of the last failed connect or call */
  int attempted;
  uint64_t cancelled_ms; /* when a cancelled call last closed it (client.c) */
} pcache__lane;

struct pcache_client {
  char *socket_path; /* NULL: nowhere to connect (local only) */
  char *app_name;
  uint32_t timeout_ms;
  int disabled;
  pcache__lane lanes[PCACHE__LANE_COUNT];
  /* The daemon's limits from its Hello, the same on every connection. */
  _Atomic uint32_t max_hashes;
  _Atomic uint64_t max_blob;
  _Atomic uint64_t max_snapshot; /* 0: a daemon without snapshots */
  _Atomic uint64_t max_frame;
  /* The daemon takes Put.stage (HelloReply.stages): it has a replayer to
   * build staged pipelines in the background (build.h, "Staging"). */
  atomic_int stages;
  atomic_int connected; /* the last exchange, on either lane, succeeded */
  /* The app's lane was started at open and its Hello is unanswered
   * (client.c, start_locked): the daemon took the connection. */
  atomic_int app_pending;
  int told_connected;   /* what the log last said of the app's lane: 1 up, 0 down,
                         * -1 nothing yet (under that lane's lock) */
  int told_background;  /* the same for the background lane (under its lock) */
  int say_inactive;     /* PCACHE__CLIENT_SAY_INACTIVE */
  pid_t pid;            /* the process that opened it: a forked child may not use it */
  pcache__logger log;
};

/* pcache__client_open_flags: say once a process, as a warning even with no
 * $PCACHE_LOG, when the daemon cannot be used (no socket path, no daemon, a
 * refusal) and what to do. The Vulkan layer's clients: a user who set
 * PCACHE_LAYER=1 expects a cache and would otherwise never learn there is
 * none. An app's library stays quiet (pcache.h, "Logging"). */
#define PCACHE__CLIENT_SAY_INACTIVE 1u

/* pcache_client_open with flags (PCACHE__CLIENT_*). */
int pcache__client_open_flags(const pcache_client_options *options, unsigned flags,
                              pcache_client **ret_client);

/* Where a device context's messages go: its client's logger, or
 * $PCACHE_LOG's alone when it has no client. */
static inline pcache__logger *pcache__client_logger(pcache_client *client) {
  return client ? &client->log : pcache__logger_default();
}

/*
 * pcache__client_rpc - one request and its reply within timeout_ms
 * (pcache__rpc's verdict) on the lane's connection, connecting first if
 * needed and allowed (at most once a second a lane). Returns 0 when the
 * daemon answered status 0 with the body `expect`; otherwise
 * PCACHE_EDISABLED, PCACHE_EUNAVAILABLE, -ETIMEDOUT, -ECANCELED (the
 * calling thread's cancel fd, pcache__rpc_set_cancel_fd), or
 * pcache__rpc's result: the daemon's refusal (its Response then in
 * ret_reply->response; the connection stays) or a failure of the
 * exchange, a Response out of step included (PCACHE_EPROTO with a
 * Response of status >= 0: another kind, or a status not ours): the
 * connection is then closed and the client marked disconnected. As with pcache__rpc,
 * *ret_reply is written in every case: release it in every case.
 */
int pcache__client_rpc(pcache_client *client, pcache__lane_id lane,
                       const Pcachepb__Request *request, Pcachepb__Response__BodyCase expect,
                       uint32_t timeout_ms, pcache__reply *ret_reply);

/* The timeout of a background call (PCACHE__BACKGROUND_TIMEOUT_FACTOR). */
static inline uint32_t pcache__client_background_timeout_ms(const pcache_client *client) {
  uint64_t ms = (uint64_t)client->timeout_ms * PCACHE__BACKGROUND_TIMEOUT_FACTOR;
  return ms > 600000u ? 600000u : (uint32_t)ms;
}

/* Reads the answer to the Hello that open sent, if nothing has: for
 * pcache_client_connected, and from a device's upload thread as it
 * starts, so that the daemon's limits, and a
 * refusal (said, for the layer, as its being inactive), are known soon
 * after open even when no app call needs the daemon. At most the
 * client's timeout; a cancel (pcache__rpc_set_cancel_fd) ends it. */
void pcache__client_settle(pcache_client *client);

/* 1 when the client may speak to a daemon: not disabled, a socket path,
 * and this is the process that opened it (not a forked child). */
int pcache__client_usable(const pcache_client *client);

/* 1 when the daemon is there as far as the client knows without waiting:
 * connected, or the app's connection made and its Hello unanswered. */
int pcache__client_reachable(pcache_client *client);

/* Whether the daemon builds staged pipelines (HelloReply.stages); 1 while
 * the app's Hello is unanswered: a daemon without a replayer takes a
 * staged Put's items as no one's (daemon/jobs/ops_put.c), and the Hello is
 * read by the time the first miss asks the daemon. */
static inline int pcache__client_stages(pcache_client *client) {
  return atomic_load(&client->stages) || atomic_load(&client->app_pending);
}

/* The daemon's limit on items per request (default when unknown). */
uint32_t pcache__client_max_hashes(pcache_client *client);

#endif
