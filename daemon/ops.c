#include "ops.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
#include "common/blob.h"
#include "proto/desc_check.h"
#include "common/log.h"
#include "common/vec.h"
#include "common/parse.h"
#include "item.h"

/* -------------------------------------------------------------------- put */

static int op_put(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Put *put = job->req->put;
  Pcachepb__PutReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  pcache__devkey key;
  uint64_t now = pcd_now_us(), room = 0, put_bytes = 0;
  const char *app = put->app && *put->app ? put->app : job->app;
  int key_ok = put->device && put->device->key.len == PCACHE_DEVKEY_SIZE, new_device = 0, r;

  if (!reply)
    return -ENOMEM;
  pcachepb__put_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_PUT;
  job->resp.put = reply;
  if (put->n_items > cfg->max_hashes) {
    job->resp.status = PCACHE_ETOO_MANY_HASHES;
    job->resp.message = pcd_arena_printf(&job->arena, "%zu items, the limit is %u",
                                         put->n_items, cfg->max_hashes);
    job->rejected = put->n_items;
    return 0;
  }
  if (strlen(app) > PCD_MAX_APP) {
    job->resp.status = PCACHE_EBAD_SIZE;
    job->resp.message = pcd_arena_printf(&job->arena, "app name longer than %d bytes", PCD_MAX_APP);
    job->rejected = put->n_items;
    return 0;
  }
  reply->results = pcd_arena_alloc(&job->arena, (put->n_items + 1) * sizeof *reply->results);
  if (!reply->results)
    return -ENOMEM;
  if (key_ok) {
    pcd_device d;
    room = cfg->max_size > PCD_DEVICE_COST_MAX ? cfg->max_size - PCD_DEVICE_COST_MAX : 0;
    memcpy(key.bytes, put->device->key.data, PCACHE_DEVKEY_SIZE);
    if ((r = pcd_device_get(txn, key.bytes, &d)) < 0 && r != PCACHE_ENOT_FOUND)
      return r;
    new_device = r == PCACHE_ENOT_FOUND;
    if ((r = pcd_device_touch(txn, put->device, now / 1000000)) < 0)
      return r;
  } else {
    job->resp.status = PCACHE_EBAD_KEY;
    job->resp.message = pcd_arena_strdup(&job->arena, "device key is not 32 bytes");
  }
  for (size_t i = 0; i < put->n_items; i++) {
    const Pcachepb__PutItem *it = put->items[i];
    Pcachepb__PutResult *res = pcd_arena_alloc(&job->arena, sizeof *res);
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
        .last_used_us = now,
    };
    int st = PCACHE_EBAD_KEY;
    char *msg = NULL;
    uint64_t cost = pcd_item_cost(&item);
    if (!res)
      return -ENOMEM;
    pcachepb__put_result__init(res);
    res->state_hash.data = it->state_hash.data;
    res->state_hash.len = it->state_hash.len;
    /* What this Put stores must fit under the cap together: the eviction
     * that follows would otherwise drop items just acknowledged. */
    if (key_ok && cost > room - put_bytes) {
      st = PCACHE_EFULL;
      msg = pcd_arena_printf(&job->arena,
                             "item of %llu bytes does not fit under --max-size (%llu bytes, %llu "
                             "taken by this request)",
                             (unsigned long long)cost, (unsigned long long)cfg->max_size,
                             (unsigned long long)put_bytes);
    } else if (key_ok &&
               (r = pcd_item_store(txn, &key, &item, cfg->max_blob, &job->arena, &st, &msg)) < 0) {
      return r;
    }
    if (st == 0)
      put_bytes += cost;
    res->status = st;
    if (st < 0) {
      res->message = msg ? msg : pcd_arena_strdup(&job->arena, pcache_strerror(st));
      job->rejected++;
      log_debug("put: item %zu refused: %s", i, res->message);
    } else {
      reply->stored++;
      job->stored++;
    }
    reply->results[reply->n_results++] = res;
  }
  /* The device record was made first so its counters include the items;
   * when every item was refused, a new device leaves no trace either. */
  if (new_device && !job->stored && (r = pcd_device_forget(txn, key.bytes)) < 0)
    return r;
  if (job->stored) {
    uint64_t n = 0;
    if ((r = pcd_evict(txn, cfg->max_size, &n, NULL)) < 0)
      return r;
    reply->evicted = (uint32_t)n;
    job->evicted = n;
  }
  return 0;
}

/* ------------------------------------------------------------ snapshot */

static int snapshot_refuse(pcd_job *job, int status, const char *why) {
  job->resp.status = status;
  job->resp.message = pcd_arena_strdup(&job->arena, why ? why : pcache_strerror(status));
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
    job->resp.message = pcd_arena_printf(&job->arena, "app name longer than %d bytes", PCD_MAX_APP);
    return snapshot_refuse(job, PCACHE_EBAD_SIZE, job->resp.message);
  }
  if (ps->blob.len > cfg->max_snapshot) {
    job->resp.message = pcd_arena_printf(&job->arena, "snapshot of %zu bytes, the limit is %llu",
                                         ps->blob.len, (unsigned long long)cfg->max_snapshot);
    return snapshot_refuse(job, PCACHE_EBLOB_TOO_LARGE, job->resp.message);
  }
  if (ps->n_state_hashes > PCD_MAX_SNAPSHOT_HASHES) {
    job->resp.message = pcd_arena_printf(&job->arena, "%zu state hashes, the limit is %u",
                                         ps->n_state_hashes, PCD_MAX_SNAPSHOT_HASHES);
    return snapshot_refuse(job, PCACHE_ETOO_MANY_HASHES, job->resp.message);
  }
  for (size_t i = 0; i < ps->n_state_hashes; i++)
    if (ps->state_hashes[i].len != PCACHE_HASH_SIZE)
      return snapshot_refuse(job, PCACHE_EBAD_KEY, "state hash is not 16 bytes");
  /* It would evict everything else and then itself. */
  if (ps->blob.len + ps->n_state_hashes * PCACHE_HASH_SIZE > cfg->max_size) {
    job->resp.message = pcd_arena_printf(
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
  if ((r = pcd_evict_keep(txn, cfg->max_size, key.bytes, snap.app, &n, NULL)) < 0)
    return r;
  job->evicted = n;
  reply = pcd_arena_alloc(&job->arena, sizeof *reply);
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

/* ---------------------------------------------------------------- report */

static int op_report(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Report *rep = job->req->report;
  Pcachepb__ReportReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  char hex[33];
  int r;
  if (!reply)
    return -ENOMEM;
  pcachepb__report_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_REPORT;
  job->resp.report = reply;
  /* The device key's length was checked before the job was queued
   * (validate.c). */
  memcpy(key, rep->device_key.data, PCACHE_DEVKEY_SIZE);
  switch (rep->snapshot) {
  case PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED:
  case PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM:
  case PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER: {
    const char *app = rep->app && *rep->app ? rep->app : job->app;
    uint64_t bytes = 0;
    job->stored++;
    r = pcd_snapshot_delete(txn, key, app, &bytes);
    if (r < 0 && r != PCACHE_ENOT_FOUND)
      return r;
    if (r == 0) {
      reply->snapshots++;
      reply->bytes += bytes;
      log_info("report: client refused the snapshot of app '%s' (reason %d); dropped it", app,
               rep->snapshot);
    }
    break;
  }
  default:
    break;
  }
  for (size_t i = 0; i < rep->n_items; i++) {
    const Pcachepb__ReportItem *it = rep->items[i];
    uint64_t bytes = 0;
    job->stored++; /* counted as reports */
    if (it->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    memcpy(key + PCACHE_DEVKEY_SIZE, it->state_hash.data, PCACHE_HASH_SIZE);
    pcache__hex(it->state_hash.data, PCACHE_HASH_SIZE, hex);
    switch (it->reason) {
    case PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED:
    case PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM:
    case PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER:
      r = pcd_entry_delete(txn, key, &bytes);
      if (r == PCACHE_ENOT_FOUND)
        break;
      if (r < 0)
        return r;
      reply->entries++;
      reply->bytes += bytes;
      log_info("report: client refused entry %s (reason %d); dropped it", hex, it->reason);
      break;
    default:
      log_debug("report: entry %s loaded but the driver compiled anyway", hex);
      break;
    }
  }
  return 0;
}

/* ----------------------------------------------------------------- purge */

typedef struct entry_key {
  uint8_t bytes[PCD_ENTRY_KEY_SIZE];
} entry_key;

typedef struct key_list {
  PCACHE_VEC(entry_key) keys;
  int oom;
} key_list;

static int key_list_add(key_list *l, const uint8_t *key) {
  entry_key k;
  memcpy(k.bytes, key, PCD_ENTRY_KEY_SIZE);
  if (pcache_vec_push(&l->keys, k) < 0) {
    l->oom = 1;
    return -ENOMEM;
  }
  return 0;
}

/* Snapshots to remove: (device key, app) pairs. */
typedef struct snap_list {
  PCACHE_VEC(pcd_snapshot) v;
  const char *app; /* only this app's, when set */
} snap_list;

static int snap_visit(void *ctx, const pcd_snapshot *s) {
  snap_list *l = ctx;
  if (l->app && strcmp(s->app, l->app) != 0)
    return 0;
  return pcache_vec_push(&l->v, *s);
}

/* Removes the snapshots of device (NULL: every device) and app (NULL:
 * every app). */
static int purge_snapshots(pcd_txn *txn, const uint8_t *device, const char *app,
                           uint64_t *ret_count, uint64_t *ret_bytes) {
  snap_list l = {.app = app};
  int r = pcd_snapshots_foreach(txn, device, snap_visit, &l);
  for (size_t i = 0; r == 0 && i < l.v.n; i++) {
    uint64_t bytes = 0;
    r = pcd_snapshot_delete(txn, l.v.items[i].device_key, l.v.items[i].app, &bytes);
    if (r == PCACHE_ENOT_FOUND) {
      r = 0;
      continue;
    }
    if (r == 0) {
      (*ret_count)++;
      *ret_bytes += bytes;
    }
  }
  pcache_vec_free(&l.v);
  return r;
}

typedef PCACHE_VEC(pcache__devkey) devkey_list;

static int devkey_visit(void *ctx, const pcd_device *d) {
  pcache__devkey k;
  memcpy(k.bytes, d->key, PCACHE_DEVKEY_SIZE);
  return pcache_vec_push((devkey_list *)ctx, k);
}

/* Drops every device record with no entries and no snapshots. */
static int forget_unused_devices(pcd_txn *txn) {
  devkey_list l = {0};
  int r = pcd_devices_foreach(txn, devkey_visit, &l);
  for (size_t i = 0; r == 0 && i < l.n; i++)
    r = pcd_device_forget(txn, l.items[i].bytes);
  pcache_vec_free(&l);
  return r;
}

struct purge_filter {
  key_list list;
  const Pcachepb__Purge *purge;
  uint64_t cutoff_us;
};

static int purge_visit(void *ctx, const pcd_entry *e) {
  struct purge_filter *f = ctx;
  const Pcachepb__Purge *p = f->purge;
  int match = 0;
  switch (p->selector_case) {
  case PCACHEPB__PURGE__SELECTOR_ALL:
    match = p->all;
    break;
  case PCACHEPB__PURGE__SELECTOR_DEVICE_KEY:
    match = 1; /* the scan is limited to the device */
    break;
  case PCACHEPB__PURGE__SELECTOR_APP:
    match = strcmp(e->app, p->app) == 0;
    break;
  case PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S:
    match = e->last_used_us < f->cutoff_us;
    break;
  case PCACHEPB__PURGE__SELECTOR_STATE_HASH:
    match = memcmp(e->key + PCACHE_DEVKEY_SIZE, p->state_hash.data, PCACHE_HASH_SIZE) == 0;
    break;
  default:
    break;
  }
  return match ? key_list_add(&f->list, e->key) : 0;
}

static int op_purge(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Purge *p = job->req->purge;
  Pcachepb__PurgeReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  struct purge_filter f = {.purge = p};
  const uint8_t *dev = NULL;
  uint64_t now = pcd_now_us();
  int r;
  if (!reply)
    return -ENOMEM;
  pcachepb__purge_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_PURGE;
  job->resp.purge = reply;
  switch (p->selector_case) {
  case PCACHEPB__PURGE__SELECTOR_DEVICE_KEY:
    if (p->device_key.len != PCACHE_DEVKEY_SIZE)
      goto out_bad_key;
    dev = p->device_key.data;
    break;
  case PCACHEPB__PURGE__SELECTOR_STATE_HASH:
    if (p->state_hash.len != PCACHE_HASH_SIZE)
      goto out_bad_key;
    break;
  case PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S:
    /* Times are microseconds in 64 bits: an age that does not fit would
     * wrap into a short one and purge fresh entries. */
    if (p->older_than_s > PCACHE_DURATION_MAX_S) {
      job->resp.status = PCACHE_EBAD_SIZE;
      job->resp.message = pcd_arena_printf(&job->arena, "older_than_s %llu is out of range (at most %llu)",
                                           (unsigned long long)p->older_than_s,
                                           (unsigned long long)PCACHE_DURATION_MAX_S);
      return 0;
    }
    f.cutoff_us = p->older_than_s * 1000000 > now ? 0 : now - p->older_than_s * 1000000;
    break;
  case PCACHEPB__PURGE__SELECTOR_ALL:
  case PCACHEPB__PURGE__SELECTOR_APP:
    break;
  default:
    job->resp.status = PCACHE_EPROTO;
    job->resp.message = pcd_arena_strdup(&job->arena, "purge needs a selector");
    return 0;
  }
  r = pcd_entries_foreach(txn, dev, purge_visit, &f);
  if (r < 0 || f.list.oom)
    goto out_free;
  for (size_t i = 0; i < f.list.keys.n; i++) {
    uint64_t bytes = 0;
    r = pcd_entry_delete(txn, f.list.keys.items[i].bytes, &bytes);
    if (r == PCACHE_ENOT_FOUND)
      continue;
    if (r < 0)
      goto out_free;
    reply->entries++;
    reply->bytes += bytes;
  }
  /* Snapshots go with a whole device or app; an entry or age purge leaves
   * them: the hashes they cover whose entries are gone are no longer
   * announced (Prefetch checks), and what is left of them still loads. */
  r = 0;
  if (p->selector_case == PCACHEPB__PURGE__SELECTOR_ALL && p->all)
    r = purge_snapshots(txn, NULL, NULL, &reply->snapshots, &reply->bytes);
  else if (p->selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY)
    r = purge_snapshots(txn, dev, NULL, &reply->snapshots, &reply->bytes);
  else if (p->selector_case == PCACHEPB__PURGE__SELECTOR_APP)
    r = purge_snapshots(txn, NULL, p->app, &reply->snapshots, &reply->bytes);
  /* Device records go with their last entry and snapshot; records a store
   * from before that rule kept with neither go with a whole purge too. */
  if (r == 0 && p->selector_case == PCACHEPB__PURGE__SELECTOR_ALL && p->all)
    r = forget_unused_devices(txn);
  else if (r == 0 && p->selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY)
    r = pcd_device_forget(txn, dev);
  if (r < 0)
    goto out_free;
  log_info("purge: removed %llu entries, %llu snapshots, %llu bytes",
           (unsigned long long)reply->entries, (unsigned long long)reply->snapshots,
           (unsigned long long)reply->bytes);
out_free:
  pcache_vec_free(&f.list.keys);
  return f.list.oom ? -ENOMEM : r;

out_bad_key:
  job->resp.status = PCACHE_EBAD_KEY;
  job->resp.message = pcd_arena_strdup(&job->arena, pcache_strerror(PCACHE_EBAD_KEY));
  return 0;
}

/* ---------------------------------------------------------------- verify */

static int collect_key(void *ctx, const pcd_entry *e) { return key_list_add(ctx, e->key); }

/* The checks Get/Prefetch make before sending, plus the header and the
 * description: 0 or the first failure. */
static int check_entry(pcd_txn *txn, const pcd_entry *e, const char **ret_why) {
  pcache__devkey dk;
  pcache__hash sh, mods[PCACHE_DESC_MAX_MODULES];
  const uint8_t *blob, *desc;
  size_t blob_size, desc_size, n = 0;
  int r = pcd_blob_get(txn, e->key, &blob, &blob_size);
  *ret_why = NULL;
  if (r < 0) {
    *ret_why = "blob missing";
    return r == PCACHE_ENOT_FOUND ? PCACHE_ESTORE : r;
  }
  if (blob_size != e->blob_size || pcache__checksum64(blob, blob_size) != e->checksum)
    return PCACHE_ECHECKSUM;
  memcpy(dk.bytes, e->key, PCACHE_DEVKEY_SIZE);
  if ((r = pcache__blob_check_header(blob, blob_size, &dk)) < 0)
    return r;
  memcpy(sh.bytes, e->key + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
  r = pcd_desc_get(txn, e->key, &desc, &desc_size);
  if (r < 0) {
    *ret_why = "description missing";
    return PCACHE_EBAD_DESC;
  }
  return pcache__desc_check(desc, desc_size, &sh, e->kind, mods, &n);
}

static int add_problem(pcd_job *job, Pcachepb__VerifyReply *reply, size_t *cap,
                       Pcachepb__Problem **ret_problem) {
  Pcachepb__Problem *pb;
  reply->problems =
      pcd_arena_grow(&job->arena, reply->problems, reply->n_problems, cap, sizeof *reply->problems);
  if (!reply->problems)
    return -ENOMEM;
  pb = pcd_arena_alloc(&job->arena, sizeof *pb);
  if (!pb)
    return -ENOMEM;
  pcachepb__problem__init(pb);
  reply->problems[reply->n_problems++] = pb;
  *ret_problem = pb;
  return 0;
}

/* Each snapshot: its record decodes, sizes agree, the blob matches its
 * checksum and its header the device. A problem names the device key and
 * no state hash; repair drops the snapshot. */
static int verify_snapshots(pcd_txn *txn, pcd_job *job, Pcachepb__VerifyReply *reply,
                            size_t *cap) {
  snap_list l = {0};
  int r = pcd_snapshots_foreach(txn, NULL, snap_visit, &l);
  for (size_t i = 0; r == 0 && i < l.v.n; i++) {
    const pcd_snapshot *s = &l.v.items[i];
    pcd_snapshot got;
    const uint8_t *blob = NULL;
    Pcachepb__Problem *pb;
    pcache__devkey dk;
    int st = pcd_snapshot_get(txn, s->device_key, s->app, &got, NULL, &blob);
    memcpy(dk.bytes, s->device_key, PCACHE_DEVKEY_SIZE);
    if (st == 0 && pcache__checksum64(blob, got.blob_size) != got.checksum)
      st = PCACHE_ECHECKSUM;
    if (st == 0)
      st = pcache__blob_check_header(blob, got.blob_size, &dk);
    if (st == 0 || st == PCACHE_ENOT_FOUND)
      continue;
    if ((r = add_problem(job, reply, cap, &pb)) < 0)
      break;
    pb->device_key.data = pcd_arena_memdup(&job->arena, s->device_key, PCACHE_DEVKEY_SIZE);
    pb->device_key.len = PCACHE_DEVKEY_SIZE;
    pb->status = st;
    pb->message = pcd_arena_printf(&job->arena, "snapshot of app '%s': %s", s->app,
                                   pcache_strerror(st));
    log_warn("verify: %s", pb->message ? pb->message : "snapshot");
    if (job->req->verify->repair) {
      r = pcd_snapshot_delete(txn, s->device_key, s->app, NULL);
      if (r == PCACHE_ENOT_FOUND)
        r = 0;
      if (r == 0)
        reply->removed++;
    }
  }
  pcache_vec_free(&l.v);
  return r;
}

/* The walk the daemon makes at start, run now in a child process: damage
 * to LMDB's own pages (which would fault or abort the walk below, or the
 * frees of a repair) is reported as the one problem, with no state hash,
 * and nothing else is read or repaired; the next start moves the store
 * aside. Returns 0 (sound or unchecked), 1 (reported) or -errno. */
static int verify_structure(pcd_txn *txn, pcd_job *job, Pcachepb__VerifyReply *reply,
                            size_t *cap) {
  Pcachepb__Problem *pb;
  char why[600];
  int r = pcd_store_check(txn, why, sizeof why);
  if (r < 0)
    log_warn("verify: could not walk the store's pages: %s", strerror(-r));
  if (r <= 0)
    return 0;
  if ((r = add_problem(job, reply, cap, &pb)) < 0)
    return r;
  pb->status = PCACHE_ESTORE;
  pb->message = pcd_arena_printf(&job->arena,
                                 "the store's pages are damaged (%s); nothing was repaired: "
                                 "restart pcached to move the store aside and start a fresh one",
                                 why);
  log_error("verify: %s", pb->message ? pb->message : why);
  return job->arena.failed ? -ENOMEM : 1;
}

static int op_verify(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  Pcachepb__VerifyReply *reply = pcd_arena_alloc(&job->arena, sizeof *reply);
  key_list list = {0};
  size_t cap = 0;
  int r;
  if (!reply)
    return -ENOMEM;
  pcachepb__verify_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_VERIFY;
  job->resp.verify = reply;
  if ((r = verify_structure(txn, job, reply, &cap)) != 0)
    return r < 0 ? r : 0;
  r = pcd_entries_foreach(txn, NULL, collect_key, &list);
  if (r < 0 || list.oom)
    goto out_free;
  for (size_t i = 0; i < list.keys.n; i++) {
    pcd_entry e;
    const char *why;
    Pcachepb__Problem *pb;
    int st = pcd_entry_get(txn, list.keys.items[i].bytes, &e);
    if (st == PCACHE_ENOT_FOUND)
      continue;
    reply->checked++;
    if (st == 0)
      st = check_entry(txn, &e, &why);
    else
      why = "unreadable metadata";
    if (st == 0)
      continue;
    if (st == -ENOMEM) {
      r = st;
      goto out_free;
    }
    reply->problems = pcd_arena_grow(&job->arena, reply->problems, reply->n_problems, &cap,
                                     sizeof *reply->problems);
    if (!reply->problems) {
      r = -ENOMEM;
      goto out_free;
    }
    pb = pcd_arena_alloc(&job->arena, sizeof *pb);
    if (!pb) {
      r = -ENOMEM;
      goto out_free;
    }
    pcachepb__problem__init(pb);
    pb->device_key.data =
        pcd_arena_memdup(&job->arena, list.keys.items[i].bytes, PCACHE_DEVKEY_SIZE);
    pb->device_key.len = PCACHE_DEVKEY_SIZE;
    pb->state_hash.data = pcd_arena_memdup(
        &job->arena, list.keys.items[i].bytes + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
    pb->state_hash.len = PCACHE_HASH_SIZE;
    pb->status = st;
    pb->message = pcd_arena_strdup(&job->arena, why ? why : pcache_strerror(st));
    reply->problems[reply->n_problems++] = pb;
    {
      char hex[33];
      pcache__hex(list.keys.items[i].bytes + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE, hex);
      log_warn("verify: entry %s: %s", hex, pb->message ? pb->message : "?");
    }
    if (job->req->verify->repair) {
      r = pcd_entry_delete(txn, list.keys.items[i].bytes, NULL);
      if (r < 0 && r != PCACHE_ENOT_FOUND)
        goto out_free;
      reply->removed++;
    }
  }
  r = verify_snapshots(txn, job, reply, &cap);
  if (r == 0)
    r = job->arena.failed ? -ENOMEM : 0;
out_free:
  pcache_vec_free(&list.keys);
  return list.oom ? -ENOMEM : r;
}

/* ------------------------------------------------------- touch and drop */

static int op_touch(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  for (size_t i = 0; i < job->n_touches; i++) {
    int r = pcd_entry_touch(txn, job->touches[i].key, job->touches[i].last_used_us,
                            job->touches[i].hits);
    if (r < 0)
      return r;
  }
  return 0;
}

static int op_drop(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  for (size_t i = 0; i < job->n_touches; i++) {
    int r = pcd_entry_delete(txn, job->touches[i].key, NULL);
    if (r < 0 && r != PCACHE_ENOT_FOUND)
      return r;
  }
  return 0;
}

/* ------------------------------------------------------------- the tables */

static void count_put(const pcd_job *job, pcd_stats *stats, int failed) {
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

static void count_snapshot(const pcd_job *job, pcd_stats *stats, int failed) {
  if (!failed)
    atomic_fetch_add(&stats->evictions, job->evicted);
}

static uint64_t bytes_snapshot(const pcd_job *job) {
  const Pcachepb__PutSnapshot *ps = job->req ? job->req->put_snapshot : NULL;
  return ps ? ps->blob.len + ps->n_state_hashes * 64u : 0;
}

static void count_report(const pcd_job *job, pcd_stats *stats, int failed) {
  if (!failed)
    atomic_fetch_add(&stats->reports, job->stored);
}

/* Purge and Verify walk the whole store. */
static uint64_t bytes_walk(const pcd_job *job) { return PCD_TRIM_BYTES; }

const pcd_job_ops pcd_job_put = {
    .name = "put", .run = op_put, .count = count_put, .bytes = bytes_put};
const pcd_job_ops pcd_job_snapshot = {.name = "put snapshot",
                                      .run = op_put_snapshot,
                                      .count = count_snapshot,
                                      .bytes = bytes_snapshot};
const pcd_job_ops pcd_job_snapshot_drop = {.name = "snapshot drop", .run = op_snapshot_drop};
const pcd_job_ops pcd_job_report = {.name = "report", .run = op_report, .count = count_report};
const pcd_job_ops pcd_job_purge = {.name = "purge", .run = op_purge, .bytes = bytes_walk};
const pcd_job_ops pcd_job_verify = {.name = "verify", .run = op_verify, .bytes = bytes_walk};
const pcd_job_ops pcd_job_touch = {.name = "touch", .run = op_touch};
const pcd_job_ops pcd_job_drop = {.name = "drop", .run = op_drop};
