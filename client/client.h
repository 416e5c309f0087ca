/* The client (client.c): one connection to pcached per process, shared by
 * every device context, and the one way the library talks to the daemon
 * (pcache__client_rpc). */
#ifndef PCACHE_CLIENT_CLIENT_H
#define PCACHE_CLIENT_CLIENT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include <pcache/pcache.h>

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
};

/*
 * pcache__client_call - one request/reply exchange within timeout_ms,
 * connecting first if needed and allowed (at most once a second). Returns
 * 0 with a reply whose status the caller checks, PCACHE_EDISABLED,
 * PCACHE_EUNAVAILABLE, -ETIMEDOUT, or a transport failure (the connection
 * is then closed and the client marked disconnected).
 */
int pcache__client_call(pcache_client *client, const Pcachepb__Request *request,
                        uint32_t timeout_ms, pcache__reply *ret_reply);

/*
 * pcache__client_rpc - pcache__client_call, then the verdict: 0 when the
 * daemon answered status 0 with the body `expect` (the reply is the
 * caller's to release); otherwise the reply is released and the result is
 * the call's failure, the daemon's status (< 0), or PCACHE_EPROTO for a
 * reply with another body.
 */
int pcache__client_rpc(pcache_client *client, const Pcachepb__Request *request,
                       Pcachepb__Response__BodyCase expect, uint32_t timeout_ms,
                       pcache__reply *ret_reply);

/* The daemon's limit on items per request (default when unknown). */
uint32_t pcache__client_max_hashes(pcache_client *client);

#endif
