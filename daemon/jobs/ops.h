/* Write-side requests, one file a family (ops_put.c, ops_snapshot.c,
 * ops_report.c, ops_purge.c, ops_verify.c, ops_export.c, ops_import.c;
 * ops.c has what they share and the touch and drop batches): their job
 * tables are in jobs.h. What they share is here. */
#ifndef PCD_OPS_H
#define PCD_OPS_H

#include <stdint.h>
#include <string.h>

#include "common/hash.h"
#include "common/vec.h"
#include "eviction.h"
#include "item.h"
#include "jobs.h"
#include "store.h"

/* Most state hashes one PutSnapshot may list. Every Prefetch page of the
 * app copies, sorts and searches the list on an I/O thread that other
 * clients share: 2^20 hashes cost ~270 ms a page; 2^16 a sixteenth. */
#define PCD_MAX_SNAPSHOT_HASHES (1u << 16)

/* Problems an ImportReply lists; any more are only counted in refused. */
#define PCD_IMPORT_MAX_PROBLEMS 1024

/* Export and Import (ops_export.c, ops_import.c) run in slices: when a
 * slice leaves work, it sets job->more, and the writer queues the job
 * again behind what other clients queued meanwhile. Import's slices
 * commit with the writer's batch; Export only reads
 * (pcd_job_ops.read_only), and the writer runs each of its slices in a
 * read transaction of its own. */

/* A callback's value that ends a slice (pcache__archive_read_from, the
 * entry walks). */
#define PCD_SLICE_PAUSE 1

/* A module's key in a pcd_pos_index (the modules an export wrote, those
 * an import read): module hashes are XXH3-128, their bytes already well
 * mixed. */
static inline uint64_t pcd_module_hash_key(const pcache__hash *h) {
  uint64_t v;
  memcpy(&v, h->bytes, sizeof v);
  return v;
}

/* Entry keys collected by a walk, to act on after it: a walk's callback
 * must not write through its transaction. oom: a key could not be
 * added (the list is short). */
typedef struct pcd_entry_key {
  uint8_t bytes[PCD_ENTRY_KEY_SIZE];
} pcd_entry_key;

typedef struct pcd_key_list {
  PCACHE_VEC(pcd_entry_key) keys;
  int oom;
} pcd_key_list;

/* Returns 0 or -ENOMEM (and sets l->oom). */
int pcd_key_list_add(pcd_key_list *l, const uint8_t *key);

/* Snapshots to act on after a walk: (device key, app) pairs. */
typedef struct pcd_snap_list {
  PCACHE_VEC(pcd_snapshot) v;
  const char *app; /* only this app's, when set */
} pcd_snap_list;

/* A pcd_snapshot_cb that adds each snapshot to the pcd_snap_list ctx. */
int pcd_snap_list_visit(void *ctx, const pcd_snapshot *s);

/* pcd_job_ops.bytes of a job that walks the whole store (or an archive):
 * always worth a trim afterwards. */
uint64_t pcd_job_bytes_walk(const pcd_job *job);

#endif
