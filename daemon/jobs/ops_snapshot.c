/* PutSnapshot: a (device, app) snapshot stored, replacing the last, then
 * eviction down to --max-size that spares it; and the drop of one. */
#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/blob.h"
#include "common/log.h"
#include "remote_pack.h"

static int snapshot_refuse(pcd_job *job, int status, const char *why) {
  job->resp.status = status;
  job->resp.message = pcache__arena_strdup(&job->arena, why ? why : pcache_strerror(status));
  job->rejected = 1;
  log_debug("put snapshot: refused: %s", job->resp.message);
  return 0;
}

/* Validated as a Put's blob is (the header against the device key, the
 * size against a limit of its own), plus the hash list. A refusal is a
 * bare status; a stored snapshot gets a PutSnapshotReply. */
static int op_put_snapshot(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__PutSnapshot *ps = job->req->put_snapshot;
  const char *app = ps->app && *ps->app ? ps->app : job->app;
  Pcachepb__PutSnapshotReply *reply;
  pcache__devkey key;
  pcd_snapshot snap;
  uint8_t *hashes = NULL;
  uint64_t n = 0;
  int st, r;

  if (!ps->device || ps->device->key.len != PCACHE_DEVKEY_SIZE)
    return snapshot_refuse(job, PCACHE_EBAD_KEY, "device key is not 32 bytes");
  if (strlen(app) > PCD_MAX_APP) {
    job->resp.message =
        pcache__arena_printf(&job->arena, "app name longer than %d bytes", PCD_MAX_APP);
    return snapshot_refuse(job, PCACHE_EBAD_SIZE, job->resp.message);
  }
  if (ps->blob.len > cfg->max_snapshot) {
    job->resp.message =
        pcache__arena_printf(&job->arena, "snapshot of %zu bytes, the limit is %llu", ps->blob.len,
                             (unsigned long long)cfg->max_snapshot);
    return snapshot_refuse(job, PCACHE_EBLOB_TOO_LARGE, job->resp.message);
  }
  if (ps->n_state_hashes > PCD_MAX_SNAPSHOT_HASHES) {
    job->resp.message = pcache__arena_printf(&job->arena, "%zu state hashes, the limit is %u",
                                             ps->n_state_hashes, PCD_MAX_SNAPSHOT_HASHES);
    return snapshot_refuse(job, PCACHE_ETOO_MANY_HASHES, job->resp.message);
  }
  for (size_t i = 0; i < ps->n_state_hashes; i++)
    if (ps->state_hashes[i].len != PCACHE_HASH_SIZE)
      return snapshot_refuse(job, PCACHE_EBAD_KEY, "state hash is not 16 bytes");
  /* It would evict everything else and then itself. */
  pcd_admission admission = pcd_admission_start(cfg->max_size, 0);
  if (!pcd_admission_fits(&admission, ps->blob.len + ps->n_state_hashes * PCACHE_HASH_SIZE)) {
    job->resp.message = pcache__arena_printf(
        &job->arena, "snapshot of %zu bytes is larger than --max-size (%llu bytes)",
        ps->blob.len + ps->n_state_hashes * PCACHE_HASH_SIZE, (unsigned long long)cfg->max_size);
    return snapshot_refuse(job, PCACHE_EFULL, job->resp.message);
  }
  memcpy(key.bytes, ps->device->key.data, PCACHE_DEVKEY_SIZE);
  if ((st = pcache__blob_check_header(ps->blob.data, ps->blob.len, &key)) < 0)
    return snapshot_refuse(job, st, NULL);

  if (ps->n_state_hashes) {
    hashes = pcache__malloc(ps->n_state_hashes * PCACHE_HASH_SIZE);
    if (!hashes)
      return -ENOMEM;
    for (size_t i = 0; i < ps->n_state_hashes; i++)
      memcpy(hashes + i * PCACHE_HASH_SIZE, ps->state_hashes[i].data, PCACHE_HASH_SIZE);
  }
  memset(&snap, 0, sizeof snap);
  memcpy(snap.device_key, key.bytes, PCACHE_DEVKEY_SIZE);
  snprintf(snap.app, sizeof snap.app, "%s", app);
  snap.blob_size = ps->blob.len;
  snap.n_hashes = ps->n_state_hashes;
  snap.checksum = pcache__checksum64(ps->blob.data, ps->blob.len);
  snap.created_us = pcd_now_us();
  r = pcd_snapshot_store(txn, &snap, hashes, ps->blob.data);
  pcache__free(hashes);
  if (r < 0)
    return r;
  job->stored = 1;
  pcd_push_free_all(job->pushes);
  job->pushes = NULL;
  /* Only a snapshot this machine's client made goes to the fleet. */
  if (job->remote && job->push && !job->fleet &&
      pcd_remote_pack_snapshot(ps, snap.app, &job->pushes) < 0)
    log_debug("put snapshot: not pushed to the fleet: out of memory");
  if ((r = pcd_evict_keep(txn, cfg->max_size, key.bytes, snap.app, &n, NULL)) < 0)
    return r;
  job->evicted = n;
  reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  if (!reply)
    return -ENOMEM;
  pcachepb__put_snapshot_reply__init(reply);
  reply->blob_size = snap.blob_size;
  reply->hashes = snap.n_hashes;
  reply->evicted = n;
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_PUT_SNAPSHOT;
  job->resp.put_snapshot = reply;
  log_debug("put snapshot: app '%s': %zu bytes, %zu hashes", snap.app, ps->blob.len,
            ps->n_state_hashes);
  return 0;
}

static int op_snapshot_drop(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  int r = pcd_snapshot_delete(txn, job->device_key, job->app, NULL);
  return r == PCACHE_ENOT_FOUND ? 0 : r;
}

static void committed_snapshot(pcd_job *job) {
  if (job->pushes)
    job->push(job->remote, job->pushes);
  job->pushes = NULL;
}

static void count_snapshot(const pcd_job *job, pcd_stats *stats, int failed) {
  if (!failed)
    atomic_fetch_add(&stats->evictions, job->evicted);
  if (job->fleet)
    atomic_fetch_add(job->stored && !failed ? &stats->fleet_stored : &stats->fleet_refused, 1);
}

static uint64_t bytes_snapshot(const pcd_job *job) {
  const Pcachepb__PutSnapshot *ps = job->req ? job->req->put_snapshot : NULL;
  return ps ? ps->blob.len + ps->n_state_hashes * 64u : 0;
}

const pcd_job_ops pcd_job_snapshot = {.name = "put snapshot",
                                      .run = op_put_snapshot,
                                      .committed = committed_snapshot,
                                      .count = count_snapshot,
                                      .bytes = bytes_snapshot};
const pcd_job_ops pcd_job_snapshot_drop = {.name = "snapshot drop", .run = op_snapshot_drop};
