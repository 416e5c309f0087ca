/* The job types' tables (jobs.h). The replay's jobs are defined in the
 * replay room, above this one: it sets their tables at its start
 * (pcd_job_ops_set, from pcd_replay_new), so that nothing here names
 * them. */
#include "jobs.h"

#include <errno.h>
#include <stddef.h>

#include <pcache/pcache.h>

/* A type whose table was never set (a program that made no replay, such
 * as the dispatch fuzzer): its request is answered as not served here,
 * and nothing is written. */
static int op_unserved(pcd_txn *txn, const pcd_config *config, pcd_job *job) {
  (void)txn;
  (void)config;
  job->resp.status = PCACHE_EUNAVAILABLE;
  job->resp.message = pcache__arena_strdup(&job->arena, "this pcached runs no replay");
  return job->resp.message ? 0 : -ENOMEM;
}

static const pcd_job_ops unserved = {.name = "unserved", .run = op_unserved};

static const pcd_job_ops *table[] = {
    [PCD_JOB_PUT] = &pcd_job_put,           [PCD_JOB_REPORT] = &pcd_job_report,
    [PCD_JOB_PURGE] = &pcd_job_purge,       [PCD_JOB_VERIFY] = &pcd_job_verify,
    [PCD_JOB_EXPORT] = &pcd_job_export,     [PCD_JOB_IMPORT] = &pcd_job_import,
    [PCD_JOB_SNAPSHOT] = &pcd_job_snapshot, [PCD_JOB_SNAPSHOT_DROP] = &pcd_job_snapshot_drop,
    [PCD_JOB_TOUCH] = &pcd_job_touch,       [PCD_JOB_DROP] = &pcd_job_drop,
    [PCD_JOB_REPLAY_START] = &unserved,     [PCD_JOB_REPLAY_CLAIM] = &unserved,
    [PCD_JOB_REPLAY_SYNC] = &unserved,      [PCD_JOB_APP_EXE] = &pcd_job_app_exe,
};

const pcd_job_ops *pcd_job_ops_of(pcd_job_type type) {
  return (size_t)type < sizeof table / sizeof *table ? table[type] : NULL;
}

void pcd_job_ops_set(pcd_job_type type, const pcd_job_ops *ops) {
  if ((size_t)type < sizeof table / sizeof *table && ops)
    table[type] = ops;
}
