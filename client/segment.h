/* The device's shared-memory segment (segment.c): the (device, app)
 * snapshot and blobs pcached laid out once and every client of the app
 * maps read-only (proto/segment.h). */
#ifndef PCACHE_CLIENT_SEGMENT_H
#define PCACHE_CLIENT_SEGMENT_H

#include "client/device.h"

/*
 * pcache__segment_fetch - asks the daemon for the device's segment within
 * timeout_ms and maps it (device->segment). A segment that fails its
 * checks (proto/segment.h) is refused: logged, counted
 * (stats.segment_refused), and the socket serves instead. None at all
 * (an old daemon, no entries, PCACHE_NO_SEGMENT=1) is not an error.
 * Device creation only, before the device is shared. Returns -ETIMEDOUT
 * when the daemon did not answer in time (slow, not absent), else 0.
 */
int pcache__segment_fetch(pcache_device *device, uint32_t timeout_ms);

/*
 * pcache__segment_prefetch - what a prefetch would bring, from the mapped
 * segment: its snapshot (unless snapshots are off) and the blobs it does
 * not cover (all of them without a snapshot), each checked before the
 * driver sees it. Returns 1 when the segment held everything a Prefetch
 * would send (no page needs asking for), with *ret_offset the offset a
 * socket prefetch goes on from otherwise.
 */
int pcache__segment_prefetch(pcache_device *device, uint32_t *ret_offset);

/*
 * pcache__segment_find - hash's blob in the mapped segment, checked
 * (checksum, header against the device) and loaded into a cache of its
 * own: 1 with *ret_cache, 0 when the segment has no such blob (or there
 * is no segment) or it failed its checks (reported as a blob from the
 * socket would be). Lock-free; any thread.
 */
int pcache__segment_find(pcache_device *device, const pcache__hash *hash,
                         VkPipelineCache *ret_cache);

/* Marks hash's blob in the segment refused (the driver would not merge
 * it): later misses ask the daemon. */
void pcache__segment_refuse(pcache_device *device, const pcache__hash *hash);

/* Unmaps the segment (device destruction). */
void pcache__segment_release(pcache_device *device);

#endif
