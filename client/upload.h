/* The upload thread (upload.c): one per device context that may reach a
 * daemon. It sends compiled pipelines (Put), fetches the prefetch pages
 * device creation had no time for, and uploads snapshots. */
#ifndef PCACHE_CLIENT_UPLOAD_H
#define PCACHE_CLIENT_UPLOAD_H

#include "client/device.h"

int pcache__upload_start(pcache_device *device);
/* Takes ownership of item (freed on failure too). */
void pcache__upload_enqueue(pcache_device *device, pcache__upload *item);
/* Waits up to timeout_ms for the queue to drain. 0 or -ETIMEDOUT. */
int pcache__upload_flush(pcache_device *device, uint32_t timeout_ms);
/*
 * pcache__upload_drain - at the end (the layer's vkDestroyDevice, process
 * exit): waits up to budget_ms for every queued upload and the snapshot,
 * as long as the daemon takes them. Returns 0 when all went,
 * PCACHE_EUNAVAILABLE as soon as a batch fails (daemon absent, stalled past
 * the client's timeout, or refusing), -ETIMEDOUT when the budget ran out.
 * So a healthy daemon gets the whole budget to commit, and an absent or
 * stalled one costs at most one client timeout. at_exit: drop what would
 * call the driver (the rest of a prefetch, a snapshot) and send only the
 * queued uploads, whose blobs are copies.
 */
int pcache__upload_drain(pcache_device *device, uint32_t budget_ms, int at_exit);
void pcache__upload_stop(pcache_device *device);
void pcache__upload_free(pcache__upload *item);
uint64_t pcache__upload_queue_len(pcache_device *device);
/* Hands the prefetch pages from offset on to the upload thread. */
void pcache__upload_prefetch_rest(pcache_device *device, uint32_t offset);
/* Queues a Report that the pipeline of this state hash was built from a
 * prefetched blob (its hit, for the daemon); dropped when out of memory,
 * and when the daemon does not take it. */
void pcache__upload_used(pcache_device *device, const pcache__hash *state_hash);
/* Asks the upload thread for a snapshot upload when the device cache
 * changed since the loaded snapshot (after the queued pipelines). */
void pcache__upload_want_snapshot(pcache_device *device);

#endif
