/* Blobs into the device cache (blobs.c): verify, load, merge, report. */
#ifndef PCACHE_CLIENT_BLOBS_H
#define PCACHE_CLIENT_BLOBS_H

#include "client/device.h"

/*
 * pcache__blob_load - checks a blob (checksum, then its pipeline-cache
 * header against the device key) and loads it into a VkPipelineCache of its
 * own. Returns 0 with *ret_cache, or -EINVAL with the reason it was refused
 * in *ret_reason (to report to the daemon).
 */
int pcache__blob_load(pcache_device *device, const uint8_t *blob, size_t size, uint64_t checksum,
                      VkPipelineCache *ret_cache, Pcachepb__ReportReason *ret_reason);

/*
 * pcache__blob_merge_loaded - merges n loaded caches into the device cache
 * (under its write lock) and destroys them; ret_ok[i] says whether
 * caches[i] made it.
 */
void pcache__blob_merge_loaded(pcache_device *device, const VkPipelineCache *caches, size_t n,
                               uint8_t *ret_ok);

/* Load, then merge one blob. 0, or -EINVAL with *ret_reason. */
int pcache__blob_merge(pcache_device *device, const uint8_t *blob, size_t size, uint64_t checksum,
                       Pcachepb__ReportReason *ret_reason);

/* Logs the refused blobs (rate-limited) and queues their reports for the
 * upload thread (reports.h; best effort). */
void pcache__blob_report(pcache_device *device, const Pcachepb__ReportItem *const *items,
                         size_t n_items);

#endif
