/* Write-side requests, run by the writer thread inside its transaction:
 * Put, Report, Purge, Verify, Export, Import, and the internal touch/drop
 * batches. Each fills job->resp (memory from job->arena). */
#ifndef PCD_OPS_H
#define PCD_OPS_H

#include "item.h"
#include "writer.h"

/* Returns 0 (the job's own failures are in its reply) or a code that
 * spoils the whole transaction (PCACHE_EFULL, PCACHE_ESTORE, -ENOMEM): the
 * writer then aborts and retries the batch. */
int pcd_ops_run(pcd_txn *txn, const pcd_config *config, pcd_job *job);

/* Most state hashes one PutSnapshot may list. Every Prefetch page of the
 * app copies, sorts and searches the list on an I/O thread that other
 * clients share: 2^20 hashes cost ~270 ms a page; 2^16 a sixteenth. */
#define PCD_MAX_SNAPSHOT_HASHES (1u << 16)

/* Evicts until the store's entries and snapshots hold at most max_bytes:
 * snapshots first, oldest first (they duplicate entry data and the next
 * run rebuilds them), then least-recently-used entries. Returns 0 or a
 * transaction-spoiling code. */
int pcd_evict(pcd_txn *txn, uint64_t max_bytes, uint64_t *ret_entries, uint64_t *ret_bytes);
/* The same, never evicting the snapshot of (keep_key, keep_app): the one a
 * PutSnapshot just stored. */
int pcd_evict_keep(pcd_txn *txn, uint64_t max_bytes, const uint8_t *keep_key,
                   const char *keep_app, uint64_t *ret_entries, uint64_t *ret_bytes);

/* The same, deleting at most max_items (snapshots and entries): a
 * transaction small enough for what is left of a full map. */
int pcd_evict_some(pcd_txn *txn, uint64_t max_bytes, uint64_t max_items, uint64_t *ret_entries,
                   uint64_t *ret_bytes);

/* Export and Import (ops_archive.c). Both run in slices: when a slice
 * leaves work, it sets job->more, and the writer queues the job again
 * behind what other clients queued meanwhile. Import's slices commit with
 * the writer's batch; Export only reads, and the writer runs each of its
 * slices in a read transaction of its own. */
int pcd_ops_export(pcd_txn *txn, pcd_job *job);
int pcd_ops_import(pcd_txn *txn, const pcd_config *config, pcd_job *job);
/* Encodes job's reply (an Export's streamed archive goes as it lies).
 * Returns 0, -ENOMEM or PCACHE_EFRAME_TOO_LARGE. */
int pcd_ops_encode(pcd_job *job, pcd_out *ret_out);
/* Problems an ImportReply lists; any more are only counted in refused. */
#define PCD_IMPORT_MAX_PROBLEMS 1024
/* The writer committed the transaction that ran job's last slice. */
void pcd_ops_committed(pcd_job *job);
/* Frees job->slices (with the job). */
void pcd_ops_slices_free(pcd_job *job);

#endif
