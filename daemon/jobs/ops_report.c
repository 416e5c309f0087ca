/* Report: what a client's driver refused (entries, a snapshot: the one
 * with the checksum named, when the report names one) is dropped from the
 * store, so no other client is sent it again; what it used of
 * what a Prefetch sent is the entries' hit and last use, written in this
 * transaction, so `pcachectl list` shows it once the client's report is
 * answered, not a --flush-interval later. */
#include "ops.h"

#include <errno.h>
#include <string.h>

#include <pcache/pcache.h>

#include "common/log.h"

static int op_report(pcd_txn *txn, const pcd_config *cfg, pcd_job *job) {
  const Pcachepb__Report *rep = job->req->report;
  Pcachepb__ReportReply *reply = pcache__arena_alloc(&job->arena, sizeof *reply);
  uint8_t key[PCD_ENTRY_KEY_SIZE];
  uint64_t now = pcd_now_us();
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
    if (rep->snapshot_checksum) {
      pcd_snapshot meta;
      const uint8_t *hashes, *blob;
      r = pcd_snapshot_get(txn, key, app, &meta, &hashes, &blob);
      if (r < 0 && r != PCACHE_ENOT_FOUND)
        return r;
      if (r == 0 && meta.checksum != rep->snapshot_checksum) {
        log_info("report: client refused an older snapshot of app '%s'; the newer one stays", app);
        break;
      }
    }
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
  for (size_t i = 0; i < rep->n_used; i++) {
    /* Each 16 bytes (validate.c). An entry gone since is not an error. */
    memcpy(key + PCACHE_DEVKEY_SIZE, rep->used[i].data, PCACHE_HASH_SIZE);
    if ((r = pcd_entry_touch(txn, key, now, 1)) < 0)
      return r;
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

static void count_report(const pcd_job *job, pcd_stats *stats, int failed) {
  if (!failed)
    atomic_fetch_add(&stats->reports, job->stored);
}

const pcd_job_ops pcd_job_report = {.name = "report", .run = op_report, .count = count_report};
