/* Purge: the entries a selector names (all, a device, an app, an age, a
 * state hash), with the snapshots and device records of a whole device
 * or app. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"
#include "common/parse.h"

/* Removes the snapshots of device (NULL: every device) and app (NULL:
 * every app). */
static int purge_snapshots(pcd_txn *txn, const uint8_t *device, const char *app,
                           uint64_t *ret_count, uint64_t *ret_bytes) {
  pcd_snap_list l = {.app = app};
  int r = pcd_snapshots_foreach(txn, device, pcd_snap_list_visit, &l);
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
  pcd_key_list list;
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
  return match ? pcd_key_list_add(&f->list, e->key) : 0;
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
      job->resp.message = pcd_arena_printf(
          &job->arena, "older_than_s %llu is out of range (at most %llu)",
          (unsigned long long)p->older_than_s, (unsigned long long)PCACHE_DURATION_MAX_S);
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

const pcd_job_ops pcd_job_purge = {.name = "purge", .run = op_purge, .bytes = pcd_job_bytes_walk};
