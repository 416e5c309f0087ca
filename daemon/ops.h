/* Write-side requests (ops.c, ops_archive.c): their job tables are in
 * jobs.h. What they share is here. */
#ifndef PCD_OPS_H
#define PCD_OPS_H

#include "eviction.h"
#include "item.h"
#include "jobs.h"

/* Most state hashes one PutSnapshot may list. Every Prefetch page of the
 * app copies, sorts and searches the list on an I/O thread that other
 * clients share: 2^20 hashes cost ~270 ms a page; 2^16 a sixteenth. */
#define PCD_MAX_SNAPSHOT_HASHES (1u << 16)

/* Problems an ImportReply lists; any more are only counted in refused. */
#define PCD_IMPORT_MAX_PROBLEMS 1024

/* Export and Import (ops_archive.c) run in slices: when a slice leaves
 * work, it sets job->more, and the writer queues the job again behind what
 * other clients queued meanwhile. Import's slices commit with the writer's
 * batch; Export only reads (pcd_job_ops.read_only), and the writer runs
 * each of its slices in a read transaction of its own. */

#endif
