/* The Put jobs the fleet tier hands the writer (remote.h): a read-through's
 * values, a sync's slices, a client's ask carried through the remote. One
 * place sets what every one of them carries, so that none misses the
 * server's hooks and context (without them a sync's staged Put would find
 * no replayer, ops_put.c). Its own file: the files that make these jobs call it, and it
 * calls none of them. */
#include "remote_internal.h"

pcd_job *pcd_remote_put_job(pcd_remote *r) {
  pcd_job *job = pcd_job_new(PCD_JOB_PUT);
  if (job) {
    job->fleet = 1;
    job->hooks = r ? r->put_hooks : NULL;
    job->ctx = r ? r->put_ctx : NULL;
  }
  return job;
}
