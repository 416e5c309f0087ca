/* The client (client.c): one connection to pcached per process, shared by
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

struct pcache_client {
  char *socket_path; /* NULL: nowhere to connect (local only) */
  char *app_name;
  uint32_t timeout_ms;
  int disabled;
  pthread_mutex_t lock; /* guards transport, last_attempt_ms, limits */
  pcache__transport *transport;
  uint64_t last_attempt_ms; /* of the last failed connect or call */
  int attempted;
  uint32_t max_hashes;
  uint64_t max_blob;
  uint64_t max_snapshot; /* 0: a daemon without snapshots */
  uint64_t max_frame;
  atomic_int connected;
  int told_connected; /* what the log last said: 1 up, 0 down, -1 nothing yet */
  pcache__logger log;
};

/* Where a device context's messages go: its client's logger, or
 * $PCACHE_LOG's alone when it has no client. */
static inline pcache__logger *pcache__client_logger(pcache_client *client) {
  return client ? &client->log : pcache__logger_default();
}

/*
 * pcache__client_rpc - one request and its reply within timeout_ms
 * (pcache__rpc's verdict), connecting first if needed and allowed (at most
 * once a second). Returns 0 when the daemon answered status 0 with the
 * body `expect`; otherwise PCACHE_EDISABLED, PCACHE_EUNAVAILABLE,
 * -ETIMEDOUT, or pcache__rpc's result: the daemon's refusal (its Response
 * then in ret_reply->response) or a failure of the exchange (the
 * connection is then closed and the client marked disconnected). As with
 * pcache__rpc, *ret_reply is written in every case: release it in every
 * case.
 */
int pcache__client_rpc(pcache_client *client, const Pcachepb__Request *request,
                       Pcachepb__Response__BodyCase expect, uint32_t timeout_ms,
                       pcache__reply *ret_reply);

/* The daemon's limit on items per request (default when unknown). */
uint32_t pcache__client_max_hashes(pcache_client *client);

#endif
