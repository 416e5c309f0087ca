/* Purge: the entries a selector names (all, a device, an app, an age, a
 * state hash), with the snapshots and device records of a whole device
 * or app. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/alloc.h"
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

/* A purge runs in slices of its own (jobs.h "alone"): the entries are
 * chosen once, by the first slice, and each slice deletes the next
 * job->slice_items of them and commits; the last one also removes the
 * snapshots and device records that go with the selector. On a full disk
 * one transaction deleting everything would need more new pages than the
 * file has free, and could never commit. What a slice did counts once it
 * committed (purge_committed). */
typedef struct purge_counts {
  uint64_t entries, bytes, snapshots, snapshot_bytes, other_bytes;
} purge_counts;

typedef struct purgestate {
  struct purge_filter f;
  int chosen;
  size_t done;     /* keys deleted by committed slices */
  size_t in_slice; /* keys this slice deleted, until it commits */
  int last;        /* this slice is the last */
  purge_counts total, slice;
} purgestate;

static void purge_free_slices(pcd_job *job) {
  purgestate *st = job->slices;
  if (!st)
    return;
  pcache_vec_free(&st->f.list.keys);
  pcache__free(st);
  job->slices = NULL;
}

static void purge_committed(pcd_job *job) {
  purgestate *st = job->slices;
  if (!st)
    return;
  st->done += st->in_slice;
  st->total.entries += st->slice.entries;
  st->total.bytes += st->slice.bytes;
  st->total.snapshots += st->slice.snapshots;
  st->total.snapshot_bytes += st->slice.snapshot_bytes;
  st->total.other_bytes += st->slice.other_bytes;
  if (st->last)
    log_info("purge: removed %llu entries (%llu bytes), %llu snapshots (%llu bytes), %llu bytes "
             "of modules and device records",
             (unsigned long long)st->total.entries, (unsigned long long)st->total.bytes,
             (unsigned long long)st->total.snapshots, (unsigned long long)st->total.snapshot_bytes,
             (unsigned long long)st->total.other_bytes);
}

static void purge_aborted(pcd_job *job) {
  purgestate *st = job->slices;
  if (st)
    st->in_slice = 0;
}

/* The selector's check and the cut-off of an age: 0, or the reply's
 * status set (the request is refused, nothing is deleted). */
static int purge_selector(pcd_job *job, struct purge_filter *f, const uint8_t **ret_dev) {
  const Pcachepb__Purge *p = job->req->purge;
  uint64_t now = pcd_now_us();
  *ret_dev = NULL;
  switch (p->selector_case) {
  case PCACHEPB__PURGE__SELECTOR_DEVICE_KEY:
    if (p->device_key.len != PCACHE_DEVKEY_SIZE)
      goto out_bad_key;
    *ret_dev = p->device_key.data;
    return 0;
  case PCACHEPB__PURGE__SELECTOR_STATE_HASH:
    if (p->state_hash.len != PCACHE_HASH_SIZE)
      goto out_bad_key;
    return 0;
  case PCACHEPB__PURGE__SELECTOR_OLDER_THAN_S:
    /* Times are microseconds in 64 bits: an age that does not fit would
     * wrap into a short one and purge fresh entries. */
    if (p->older_than_s > PCACHE_DURATION_MAX_S) {
      job->resp.status = PCACHE_EBAD_SIZE;
      job->resp.message = pcache__arena_printf(
          &job->arena, "older_than_s %llu is out of range (at most %llu)",
          (unsigned long long)p->older_than_s, (unsigned long long)PCACHE_DURATION_MAX_S);
      return 1;
    }
    f->cutoff_us = p->older_than_s * 1000000 > now ? 0 : now - p->older_than_s * 1000000;
    return 0;
  case PCACHEPB__PURGE__SELECTOR_ALL:
  case PCACHEPB__PURGE__SELECTOR_APP:
    return 0;
  default:
    job->resp.status = PCACHE_EPROTO;
    job->resp.message = pcache__arena_strdup(&job->arena, "purge needs a selector");
    return 1;
  }

out_bad_key:
  job->resp.status = PCACHE_EBAD_KEY;
  job->resp.message = pcache__arena_strdup(&job->arena, pcache_strerror(PCACHE_EBAD_KEY));
  return 1;
}

/* What the cap counts now (pcd_totals). */
static int capped(pcd_txn *txn, uint64_t *ret) {
  pcd_totals t;
  int r = pcd_totals_get(txn, &t);
  if (r == 0)
    *ret = t.bytes + t.snapshot_bytes;
  return r;
}

/* The last slice: snapshots go with a whole device or app; an entry or
 * age purge leaves them (the hashes they cover whose entries are gone are
 * no longer announced, Prefetch checks, and what is left of them still
 * loads). Device records go with their last entry and snapshot; records
 * a store from before that rule kept with neither go with a whole purge
 * too. */
static int purge_rest(pcd_txn *txn, const Pcachepb__Purge *p, const uint8_t *dev, purge_counts *c) {
  int r = 0;
  if (p->selector_case == PCACHEPB__PURGE__SELECTOR_ALL && p->all)
    r = purge_snapshots(txn, NULL, NULL, &c->snapshots, &c->snapshot_bytes);
  else if (p->selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY)
    r = purge_snapshots(txn, dev, NULL, &c->snapshots, &c->snapshot_bytes);
  else if (p->selector_case == PCACHEPB__PURGE__SELECTOR_APP)
    r = purge_snapshots(txn, NULL, p->app, &c->snapshots, &c->snapshot_bytes);
  if (r == 0 && p->selector_case == PCACHEPB__PURGE__SELECTOR_ALL && p->all)
    r = forget_unused_devices(txn);
  else if (r == 0 && p->selector_case == PCACHEPB__PURGE__SELECTOR_DEVICE_KEY)
    r = pcd_device_forget(txn, dev);
  return r;
}

static int op_purge(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Purge *p = job->req->purge;
  Pcachepb__PurgeReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  purgestate *st = job->slices;
  const uint8_t *dev;
  uint64_t before = 0, after = 0, entry_bytes;
  size_t end;
  int r;
  (void)cfg;
  job->more = 0;
  if (!reply)
    return -ENOMEM;
  pcachepb__purge_reply__init(reply);
  job->resp.body_case = PCACHEPB__RESPONSE__BODY_PURGE;
  job->resp.purge = reply;
  if (!st) {
    if (!(st = pcache__calloc(1, sizeof *st)))
      return -ENOMEM;
    st->f.purge = p;
    job->slices = st;
  }
  if (purge_selector(job, &st->f, &dev))
    return 0;
  if (!st->chosen) {
    r = pcd_entries_foreach(txn, dev, purge_visit, &st->f);
    if (r < 0 || st->f.list.oom) {
      pcache_vec_free(&st->f.list.keys);
      st->f.list.oom = 0;
      return r < 0 ? r : -ENOMEM;
    }
    st->chosen = 1;
  }
  memset(&st->slice, 0, sizeof st->slice);
  st->in_slice = 0;
  if ((r = capped(txn, &before)) < 0)
    return r;
  end = st->f.list.keys.n - st->done;
  end = st->done + (job->slice_items && end > job->slice_items ? job->slice_items : end);
  for (size_t i = st->done; i < end; i++) {
    uint64_t bytes = 0;
    r = pcd_entry_delete(txn, st->f.list.keys.items[i].bytes, &bytes);
    if (r == PCACHE_ENOT_FOUND)
      continue;
    if (r < 0)
      return r;
    st->slice.entries++;
    st->slice.bytes += bytes;
  }
  st->in_slice = end - st->done;
  st->last = end == st->f.list.keys.n;
  if (st->last && (r = purge_rest(txn, p, dev, &st->slice)) < 0)
    return r;
  /* What else went: modules no entry names any more, device records. */
  if ((r = capped(txn, &after)) < 0)
    return r;
  entry_bytes = st->slice.bytes + st->slice.snapshot_bytes;
  st->slice.other_bytes = before > after + entry_bytes ? before - after - entry_bytes : 0;
  job->more = !st->last;
  reply->entries = st->total.entries + st->slice.entries;
  reply->bytes = st->total.bytes + st->slice.bytes;
  reply->snapshots = st->total.snapshots + st->slice.snapshots;
  reply->snapshot_bytes = st->total.snapshot_bytes + st->slice.snapshot_bytes;
  reply->other_bytes = st->total.other_bytes + st->slice.other_bytes;
  return 0;
}

const pcd_job_ops pcd_job_purge = {.name = "purge",
                                   .run = op_purge,
                                   .alone = 1,
                                   .committed = purge_committed,
                                   .aborted = purge_aborted,
                                   .free_slices = purge_free_slices,
                                   .bytes = pcd_job_bytes_walk};
