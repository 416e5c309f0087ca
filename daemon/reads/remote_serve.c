/* Read-through on an I/O thread: a Get or a Prefetch that the fleet may
 * help waits, as a write does (the connection is busy, the job counted in
 * flight), while the remote asks Redis and the writer stores what passed;
 * then it is answered exactly as without a remote, from the store, which
 * now holds the fleet's entries. Nothing of the fleet is served that the
 * store did not accept. */
#include "remote_serve.h"

#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "proto/frame.h"
#include "reads.h"
#include "remote.h"

/* Back on the connection's worker: the request is answered now. */
static void fleet_done(pcd_job *job) {
  pcd_conn *c = job->conn;
  Pcachepb__Request *req = job->held;
  job->held = NULL;
  if (!c->closed) {
    if (req->body_case == PCACHEPB__REQUEST__BODY_GET)
      pcd_read_get(c, req->get);
    else
      pcd_read_prefetch(c, req->prefetch);
    pcd_conn_resume(c);
  }
  pcache__request_free(req);
  pcd_conn_unref(c);
  pcd_job_free(job);
}

/* The Get's state hashes the store lacks, into ret (16 bytes each, room
 * for all); returns how many, 0 also when the store cannot be read. */
static size_t get_misses(pcd_store *store, const Pcachepb__Get *g, uint8_t *ret) {
  pcd_txn *txn;
  size_t n = 0;
  if (pcd_txn_begin(store, 0, &txn) < 0)
    return 0;
  for (size_t i = 0; i < g->n_state_hashes; i++) {
    uint8_t key[PCD_ENTRY_KEY_SIZE];
    pcd_entry e;
    memcpy(key, g->device_key.data, PCACHE_DEVKEY_SIZE);
    memcpy(key + PCACHE_DEVKEY_SIZE, g->state_hashes[i].data, PCACHE_HASH_SIZE);
    if (pcd_entry_get(txn, key, &e) == PCACHE_ENOT_FOUND)
      memcpy(ret + n++ * PCACHE_HASH_SIZE, g->state_hashes[i].data, PCACHE_HASH_SIZE);
  }
  pcd_txn_abort(txn);
  return n;
}

/* Whether the store has a snapshot of (device, app). */
static int have_snapshot(pcd_store *store, const uint8_t *device_key, const char *app) {
  pcd_txn *txn;
  pcd_snapshot meta;
  const uint8_t *hashes, *blob;
  int r;
  if (pcd_txn_begin(store, 0, &txn) < 0)
    return 1;
  r = pcd_snapshot_get(txn, device_key, app, &meta, &hashes, &blob);
  pcd_txn_abort(txn);
  return r == 0;
}

/* A job that carries req through the remote and back to c. */
static pcd_job *hold(pcd_conn *c, Pcachepb__Request *req, const char *app) {
  pcd_job *job = pcd_remote_put_job(c->srv->remote);
  if (!job)
    return NULL;
  job->conn = c;
  job->finish = fleet_done;
  job->held = req;
  snprintf(job->app, sizeof job->app, "%s", app);
  pcd_conn_ref(c);
  c->busy = 1;
  c->worker->inflight++;
  return job;
}

int pcd_remote_serve(pcd_conn *c, Pcachepb__Request *req) {
  pcd_server *srv = c->srv;
  pcd_remote *remote = srv->remote;
  pcd_job *job;
  /* Trusting no writer, this daemon would refuse whatever came back. */
  if (!remote || c->closed || !pcd_remote_trusts_any(remote))
    return 0;
  if (req->body_case == PCACHEPB__REQUEST__BODY_GET) {
    const Pcachepb__Get *g = req->get;
    uint8_t *miss = pcache__malloc(g->n_state_hashes * PCACHE_HASH_SIZE + 1);
    size_t n = miss ? get_misses(srv->store, g, miss) : 0;
    if (n && !pcd_remote_ready(remote))
      atomic_fetch_add(&srv->stats.fleet_skipped, 1);
    if (!n || !pcd_remote_ready(remote) || !(job = hold(c, req, c->app))) {
      pcache__free(miss);
      return 0;
    }
    pcd_remote_ask_get(remote, job, g->device_key.data, miss, n);
    pcache__free(miss);
    return 1;
  }
  if (req->body_case == PCACHEPB__REQUEST__BODY_PREFETCH && req->prefetch->offset == 0) {
    const Pcachepb__Prefetch *p = req->prefetch;
    const char *app = p->app && *p->app ? p->app : c->app;
    int snapshot;
    if (!pcd_remote_ready(remote)) {
      atomic_fetch_add(&srv->stats.fleet_skipped, 1);
      return 0;
    }
    snapshot = p->snapshot && !have_snapshot(srv->store, p->device_key.data, app);
    if (!(job = hold(c, req, app)))
      return 0;
    pcd_remote_ask_prefetch(remote, job, p->device_key.data, app, snapshot);
    return 1;
  }
  return 0;
}
