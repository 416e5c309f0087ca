/* What each kind of writer job does, in one ops table per type (as Mesa's
 * vk_pipeline_cache keeps per-type behaviour in one ops struct): the
 * writer runs, commits, counts and encodes a job through job->ops, and
 * never switches over its type. Each write request's file defines its
 * table (ops_put.c, ops_snapshot.c: PutSnapshot and its drop,
 * ops_report.c, ops_purge.c, ops_verify.c, ops_export.c, ops_import.c;
 * ops.c: the internal touch and drop batches, and the program names
 * replay_exe.c records); jobs.c maps the types to
 * them. The replay's jobs (daemon/replay/ops_replay*.c) set theirs at its
 * start (pcd_job_ops_set). */
#ifndef PCD_JOBS_H
#define PCD_JOBS_H

#include <stdint.h>

#include "bulk.h"
#include "daemon.h"
#include "store.h"
#include "writer.h"

struct pcd_job_ops {
  const char *name;
  /* In the writer's transaction: fills job->resp from job->arena. Returns
   * 0 (the job's own failures are in its reply) or a code that spoils the
   * whole transaction (PCACHE_EFULL, PCACHE_ESTORE, -ENOMEM): the writer
   * then aborts and retries the batch. */
  int (*run)(pcd_txn *txn, const pcd_config *config, pcd_job *job);
  /* Runs in a read transaction of its own, outside any batch (Export). */
  int read_only;
  /* Runs in write transactions of its own, outside any batch, at most
   * job->slice_items items each, which the writer halves when a commit
   * finds no room (Purge: writer.c run_alone). */
  int alone;
  /* The transaction that ran it committed. May be NULL. */
  void (*committed)(pcd_job *job);
  /* The transaction that ran it (or began to: the batch stops at the
   * first failure) was aborted; the batch may run again. Whatever run
   * changed outside the store must go back. May be NULL. */
  void (*aborted)(pcd_job *job);
  /* Adds its counts to the daemon's stats once its batch is over (failed:
   * the batch's transaction failed). May be NULL. */
  void (*count)(const pcd_job *job, pcd_stats *stats, int failed);
  /* Encodes the reply: 0, -ENOMEM or PCACHE_EFRAME_TOO_LARGE. NULL:
   * pcd_reply_encode of job->resp. */
  int (*encode)(pcd_job *job, pcd_out *ret_out);
  /* Frees job->slices, the state kept between slices. May be NULL. */
  void (*free_slices)(pcd_job *job);
  /* About how many bytes it moved through malloc beyond its touches and
   * its reply (the request, LMDB's dirty pages): what decides a trim
   * afterwards. May be NULL (0). */
  uint64_t (*bytes)(const pcd_job *job);
};

/* The table of a job type. */
const pcd_job_ops *pcd_job_ops_of(pcd_job_type type);

/* Sets the table of a type defined in a room above this one (the
 * replay's, pcd_replay_new): at start, before any thread makes a job of
 * that type. Until then its jobs answer PCACHE_EUNAVAILABLE. */
void pcd_job_ops_set(pcd_job_type type, const pcd_job_ops *ops);

/* The tables (ops*.c). */
extern const pcd_job_ops pcd_job_put, pcd_job_snapshot, pcd_job_snapshot_drop, pcd_job_report,
    pcd_job_purge, pcd_job_verify, pcd_job_touch, pcd_job_drop, pcd_job_app_exe;
extern const pcd_job_ops pcd_job_export, pcd_job_import;

#endif
