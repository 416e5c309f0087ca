/* Put: a batch of pipelines for one device, each validated and stored
 * (item.c) or refused on its own, then eviction down to --max-size. A
 * staged Put (Put.stage) files its items under the device's staged key
 * and plans their build by the replayer (docs/replay.md "Staged
 * builds"), and the replayer's own Put lands its items in flight: both
 * through the job's hooks (writer.h pcd_job_hooks), which the replay, a
 * room above this one, fills. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "remote_pack.h"

/* Packs a stored item for the fleet: only what a client of this machine
 * uploaded, never what came from the fleet. A value that cannot be made
 * is only not pushed. */
static void push_item(pcd_txn *txn, pcd_job *job, const Pcachepb__Put *put,
                      const Pcachepb__PutItem *it, const pcache__devkey *key, const char *app) {
  uint8_t k[PCD_ENTRY_KEY_SIZE];
  pcache__devkey staged;
  pcd_entry e;
  pcd_push *p;
  int r;
  if (!job->remote || !job->push || job->fleet)
    return;
  /* The replayer's build of a staged item that came with a seed: a fleet
   * value a sync staged (clients stage descriptions alone), which the fleet
   * has already; pushing it back would only sign it again, on every member
   * that syncs it. */
  pcache__devkey_staged(key, &staged);
  memcpy(k, staged.bytes, PCACHE_DEVKEY_SIZE);
  memcpy(k + PCACHE_DEVKEY_SIZE, it->state_hash.data, PCACHE_HASH_SIZE);
  if (it->state_hash.len == PCACHE_HASH_SIZE && pcd_entry_get(txn, k, &e) == 0 && e.blob_size) {
    log_debug("put: a build from a fleet seed is not pushed back to the fleet");
    return;
  }
  if ((r = pcd_remote_pack_item(txn, put, it, app, &p)) < 0) {
    log_debug("put: item not pushed to the fleet: %s", pcache_strerror(r));
    return;
  }
  /* The program the app runs as goes with the Put's first entry, so that
   * a member that syncs the app builds it under that name (docs/fleet.md);
   * one that cannot be read is only not written. */
  if (!job->pushes)
    (void)pcd_app_exe_get(txn, app, p->exe);
  p->next = job->pushes;
  job->pushes = p;
}

/* A staged Put's second device record, under the staged key: what
 * pcachectl list shows the staged items under, counted like any device's
 * (docs/replay.md "Staged builds"). */
static int touch_staged_device(pcd_txn *txn, const Pcachepb__DeviceInfo *device,
                               const pcache__devkey *staged, uint64_t now_s) {
  Pcachepb__DeviceInfo info = *device;
  info.key.data = (uint8_t *)staged->bytes;
  return pcd_device_touch(txn, &info, now_s);
}

/* The entries under the staged key now: the stage hook is told how many
 * this Put added. */
static int staged_entries(pcd_txn *txn, const pcache__devkey *staged, uint64_t *ret_entries) {
  pcd_device d;
  int r = pcd_device_get(txn, staged->bytes, &d);
  *ret_entries = r == 0 ? d.entries : 0;
  return r == PCACHE_ENOT_FOUND ? 0 : r;
}

/* The replay's hooks (writer.h pcd_job_hooks), each a no-op when the job
 * has none. */
static int replay_stages(const pcd_job *job) {
  return job->hooks && job->hooks->stages && job->hooks->stages(job);
}

static int op_put(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Put *put = job->req->put;
  Pcachepb__PutReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  pcache__devkey key, staged_key;
  uint64_t now = pcd_now_us(), staged = 0, staged_before = 0;
  pcd_admission admission = pcd_admission_start(0, 0);
  const char *app = put->app && *put->app ? put->app : job->app;
  int key_ok = put->device && put->device->key.len == PCACHE_DEVKEY_SIZE, new_device = 0, r;
  /* Staged items are built by this daemon's replayer, or by no one. */
  int stage = put->stage, can_stage = stage && replay_stages(job);

  if (!reply)
    return -ENOMEM;
  /* A batch run again (the map was full) packs again. */
  pcd_push_free_all(job->pushes);
  job->pushes = NULL;
  job->staged = 0;
  pcachepb__put_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_PUT;
  job->resp.put = reply;
  if (put->n_items > cfg->max_hashes) {
    job->resp.status = PCACHE_ETOO_MANY_HASHES;
    job->resp.message = pcache__arena_printf(&job->arena, "%zu items, the limit is %u",
                                             put->n_items, cfg->max_hashes);
    job->rejected = put->n_items;
    return 0;
  }
  if (strlen(app) > PCD_MAX_APP) {
    job->resp.status = PCACHE_EBAD_SIZE;
    job->resp.message =
        pcache__arena_printf(&job->arena, "app name longer than %d bytes", PCD_MAX_APP);
    job->rejected = put->n_items;
    return 0;
  }
  reply->results = pcache__arena_alloc(&job->arena, (put->n_items + 1) * sizeof *reply->results);
  if (!reply->results)
    return -ENOMEM;
  if (key_ok) {
    pcd_device d;
    /* A staged Put may make two device records (the device's, the staged
     * key's). */
    uint64_t records = PCD_DEVICE_COST_MAX * (can_stage ? 2 : 1);
    admission = pcd_admission_start(cfg->max_size, records);
    memcpy(key.bytes, put->device->key.data, PCACHE_DEVKEY_SIZE);
    pcache__devkey_staged(&key, &staged_key);
    if ((r = pcd_device_get(txn, key.bytes, &d)) < 0 && r != PCACHE_ENOT_FOUND)
      return r;
    new_device = r == PCACHE_ENOT_FOUND;
    if ((r = pcd_device_touch(txn, put->device, now / 1000000)) < 0)
      return r;
    if (can_stage && (r = touch_staged_device(txn, put->device, &staged_key, now / 1000000)) < 0)
      return r;
    if (can_stage && (r = staged_entries(txn, &staged_key, &staged_before)) < 0)
      return r;
  } else {
    job->resp.status = PCACHE_EBAD_KEY;
    job->resp.message = pcache__arena_strdup(&job->arena, "device key is not 32 bytes");
  }
  for (size_t i = 0; i < put->n_items; i++) {
    const Pcachepb__PutItem *it = put->items[i];
    Pcachepb__PutResult *res = pcache__arena_alloc(&job->arena, sizeof *res);
    pcd_item item = {
        .state_hash = it->state_hash.data,
        .state_hash_len = it->state_hash.len,
        .kind = (uint32_t)it->kind,
        .blob = it->blob.data,
        .blob_size = it->blob.len,
        .desc = it->desc.data,
        .desc_size = it->desc.len,
        .modules = it->modules,
        .n_modules = it->n_modules,
        .app = app,
        .compile_ns = it->compile_ns,
        .created_us = now,
        /* A sync's staged items are what the fleet has, not what this
         * machine used: under --max-size they go before any entry of its
         * own (the sync can bring far more than a machine runs). */
        .last_used_us = stage && job->fleet ? 1 : now,
        .staged = stage,
    };
    int st = PCACHE_EBAD_KEY, kept = 1;
    char *msg = NULL;
    uint64_t cost = pcd_item_cost(&item);
    if (!res)
      return -ENOMEM;
    pcachepb__put_result__init(res);
    res->state_hash.data = it->state_hash.data;
    res->state_hash.len = it->state_hash.len;
    /* What this Put stores must fit under the cap together: the eviction
     * that follows would otherwise drop items just acknowledged. */
    if (key_ok && stage && !can_stage) {
      st = -EOPNOTSUPP;
      msg =
          pcache__arena_strdup(&job->arena, "this pcached builds no staged items (replay is off or "
                                            "pcache-replay is missing: HelloReply.stages)");
    } else if (key_ok && !pcd_admission_fits(&admission, cost)) {
      st = PCACHE_EFULL;
      msg =
          pcache__arena_printf(&job->arena,
                               "item of %llu bytes does not fit under --max-size (%llu bytes, %llu "
                               "taken by this request)",
                               (unsigned long long)cost, (unsigned long long)cfg->max_size,
                               (unsigned long long)admission.taken);
    } else if (key_ok) {
      if ((r = pcd_item_store(txn, &key, &item, cfg->max_blob, &job->arena, &st, &msg)) < 0)
        return r;
      kept = r == 0; /* 1: staged, but the device has it already */
    }
    if (st == 0 && kept)
      pcd_admission_take(&admission, cost);
    res->status = st;
    if (st < 0) {
      res->message = msg ? msg : pcache__arena_strdup(&job->arena, pcache_strerror(st));
      job->rejected++;
      log_debug("put: item %zu refused: %s", i, res->message);
    } else if (stage) {
      /* Acknowledged, whether filed or already built; never pushed: the
       * replayer's build is, once it is Put (docs/replay.md). */
      reply->stored++;
      job->stored += kept;
      staged += kept;
    } else {
      reply->stored++;
      job->stored++;
      push_item(txn, job, put, it, &key, app);
    }
    reply->results[reply->n_results++] = res;
  }
  /* The device record was made first so its counters include the items;
   * when every item was refused, a new device leaves no trace either. */
  if (new_device && !job->stored && (r = pcd_device_forget(txn, key.bytes)) < 0)
    return r;
  /* Staged items are filed under the staged key alone: the device's own
   * record holds none of them, and goes when it holds nothing else. */
  if (can_stage && (r = pcd_device_forget(txn, key.bytes)) < 0)
    return r;
  if (can_stage && !staged && (r = pcd_device_forget(txn, staged_key.bytes)) < 0)
    return r;
  /* Staged items were taken only with the hooks (can_stage). */
  if (staged && job->hooks->stage) {
    uint64_t after;
    if ((r = staged_entries(txn, &staged_key, &after)) < 0 ||
        (r = job->hooks->stage(job, txn, &key, after > staged_before ? after - staged_before : 0)) <
            0)
      return r;
  }
  job->staged = staged > 0;
  if (job->stored) {
    uint64_t n = 0;
    if ((r = pcd_evict(txn, cfg->max_size, &n, NULL)) < 0)
      return r;
    reply->evicted = (uint32_t)n;
    job->evicted = n;
  }
  if (job->hooks && job->hooks->landed)
    job->hooks->landed(job, put, reply);
  return 0;
}

/* Pushed only once committed: a batch that failed stored nothing. */
static void committed_put(pcd_job *job) {
  if (job->hooks && job->hooks->settled)
    job->hooks->settled(job, 1);
  if (job->pushes)
    job->push(job->remote, job->pushes);
  job->pushes = NULL;
}

static void aborted_put(pcd_job *job) {
  if (job->hooks && job->hooks->settled)
    job->hooks->settled(job, 0);
}

static void count_put(const pcd_job *job, pcd_stats *stats, int failed) {
  if (job->fleet) {
    atomic_fetch_add(&stats->fleet_stored, failed ? 0 : job->stored);
    atomic_fetch_add(&stats->fleet_refused,
                     failed ? (job->req ? job->req->put->n_items : 0) : job->rejected);
    atomic_fetch_add(&stats->evictions, failed ? 0 : job->evicted);
    return;
  }
  if (failed) {
    atomic_fetch_add(&stats->put_rejected, job->req->put->n_items);
    return;
  }
  atomic_fetch_add(&stats->puts, job->stored);
  atomic_fetch_add(&stats->put_rejected, job->rejected);
  atomic_fetch_add(&stats->evictions, job->evicted);
}

static uint64_t bytes_put(const pcd_job *job) {
  uint64_t n = 0;
  for (size_t i = 0; job->req && i < job->req->put->n_items; i++)
    n += job->req->put->items[i]->blob.len + job->req->put->items[i]->desc.len;
  return n;
}

const pcd_job_ops pcd_job_put = {.name = "put",
                                 .run = op_put,
                                 .committed = committed_put,
                                 .aborted = aborted_put,
                                 .count = count_put,
                                 .bytes = bytes_put};
