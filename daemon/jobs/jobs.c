#include "jobs.h"

#include <stddef.h>

const pcd_job_ops *pcd_job_ops_of(pcd_job_type type) {
  static const pcd_job_ops *const table[] = {
      [PCD_JOB_PUT] = &pcd_job_put,
      [PCD_JOB_REPORT] = &pcd_job_report,
      [PCD_JOB_PURGE] = &pcd_job_purge,
      [PCD_JOB_VERIFY] = &pcd_job_verify,
      [PCD_JOB_EXPORT] = &pcd_job_export,
      [PCD_JOB_IMPORT] = &pcd_job_import,
      [PCD_JOB_SNAPSHOT] = &pcd_job_snapshot,
      [PCD_JOB_SNAPSHOT_DROP] = &pcd_job_snapshot_drop,
      [PCD_JOB_TOUCH] = &pcd_job_touch,
      [PCD_JOB_DROP] = &pcd_job_drop,
      [PCD_JOB_REPLAY_START] = &pcd_job_replay_start,
      [PCD_JOB_REPLAY_CLAIM] = &pcd_job_replay_claim,
      [PCD_JOB_REPLAY_SYNC] = &pcd_job_replay_sync,
      [PCD_JOB_APP_EXE] = &pcd_job_app_exe,
  };
  return (size_t)type < sizeof table / sizeof *table ? table[type] : NULL;
}
