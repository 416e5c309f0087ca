/* Verify: every entry and snapshot checked as Get and Prefetch would
 * before sending them, and the store's pages walked first; with repair,
 * what fails is removed. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/blob.h"
#include "common/log.h"
#include "proto/desc_check.h"

static int collect_key(void *ctx, const pcd_entry *e) { return pcd_key_list_add(ctx, e->key); }

/* The checks Get/Prefetch make before sending, plus the header (of a
 * blob there is: a staged entry's may be empty) and the description: 0
 * or the first failure. */
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
  /* A staged entry may be a description alone; a seed's header names
   * the device as its staged key does (the mark is in the ABI only). */
  if (!(pcache__devkey_is_staged(&dk) && blob_size == 0) &&
      (r = pcache__blob_check_header(blob, blob_size, &dk)) < 0)
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
  reply->problems = pcache__arena_grow(&job->arena, reply->problems, reply->n_problems, cap,
                                       sizeof *reply->problems);
  if (!reply->problems)
    return -ENOMEM;
  pb = pcache__arena_alloc(&job->arena, sizeof *pb);
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
static int verify_snapshots(pcd_txn *txn, pcd_job *job, Pcachepb__VerifyReply *reply, size_t *cap) {
  pcd_snap_list l = {0};
  int r = pcd_snapshots_foreach(txn, NULL, pcd_snap_list_visit, &l);
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
    pb->device_key.data = pcache__arena_memdup(&job->arena, s->device_key, PCACHE_DEVKEY_SIZE);
    pb->device_key.len = PCACHE_DEVKEY_SIZE;
    pb->status = st;
    pb->message =
        pcache__arena_printf(&job->arena, "snapshot of app '%s': %s", s->app, pcache_strerror(st));
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

/* The size counters the cap, Stats and Purge read: each must be the sum
 * of its records. A drift is one problem, with no key; repair sets the
 * counter to the sum (after the repairs above, which keep it in step). */
static int verify_counters(pcd_txn *txn, pcd_job *job, Pcachepb__VerifyReply *reply, size_t *cap) {
  pcd_counter_drift drift[8];
  size_t n = 0;
  int repair = job->req->verify->repair;
  int r = pcd_counters_check(txn, drift, 8, &n, repair);
  for (size_t i = 0; r == 0 && i < n && i < 8; i++) {
    Pcachepb__Problem *pb;
    if ((r = add_problem(job, reply, cap, &pb)) < 0)
      break;
    pb->status = PCACHE_ESTORE;
    pb->message = pcache__arena_printf(
        &job->arena, "size counter %s is %llu, but its records hold %llu bytes%s", drift[i].counter,
        (unsigned long long)drift[i].stored, (unsigned long long)drift[i].summed,
        repair ? "; set it to the sum" : ": run pcachectl verify --repair to set it to the sum");
    log_warn("verify: %s", pb->message ? pb->message : drift[i].counter);
    if (repair)
      reply->removed++;
  }
  return r;
}

/* The walk the daemon makes at start, run now in a child process: damage
 * to LMDB's own pages (which would fault or abort the walk below, or the
 * frees of a repair) is reported as the one problem, with no state hash,
 * and nothing else is read or repaired; the next start moves the store
 * aside. Returns 0 (sound or unchecked), 1 (reported) or -errno. */
static int verify_structure(pcd_txn *txn, pcd_job *job, Pcachepb__VerifyReply *reply, size_t *cap) {
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
  pb->message =
      pcache__arena_printf(&job->arena,
                           "the store's pages are damaged (%s); nothing was repaired: "
                           "restart pcached to move the store aside and start a fresh one",
                           why);
  log_error("verify: %s", pb->message ? pb->message : why);
  return job->arena.failed ? -ENOMEM : 1;
}

static int op_verify(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  Pcachepb__VerifyReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  pcd_key_list list = {0};
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
    reply->problems = pcache__arena_grow(&job->arena, reply->problems, reply->n_problems, &cap,
                                         sizeof *reply->problems);
    if (!reply->problems) {
      r = -ENOMEM;
      goto out_free;
    }
    pb = pcache__arena_alloc(&job->arena, sizeof *pb);
    if (!pb) {
      r = -ENOMEM;
      goto out_free;
    }
    pcachepb__problem__init(pb);
    pb->device_key.data =
        pcache__arena_memdup(&job->arena, list.keys.items[i].bytes, PCACHE_DEVKEY_SIZE);
    pb->device_key.len = PCACHE_DEVKEY_SIZE;
    pb->state_hash.data = pcache__arena_memdup(
        &job->arena, list.keys.items[i].bytes + PCACHE_DEVKEY_SIZE, PCACHE_HASH_SIZE);
    pb->state_hash.len = PCACHE_HASH_SIZE;
    pb->status = st;
    pb->message = pcache__arena_strdup(&job->arena, why ? why : pcache_strerror(st));
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
    r = verify_counters(txn, job, reply, &cap);
  if (r == 0)
    r = job->arena.failed ? -ENOMEM : 0;
out_free:
  pcache_vec_free(&list.keys);
  return list.oom ? -ENOMEM : r;
}

const pcd_job_ops pcd_job_verify = {
    .name = "verify", .run = op_verify, .bytes = pcd_job_bytes_walk};
