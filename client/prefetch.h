/* Prefetch (prefetch.c). */
#ifndef PCACHE_CLIENT_PREFETCH_H
#define PCACHE_CLIENT_PREFETCH_H

#include "client/device.h"

/* Whether a prefetch (or the loaded snapshot) merged hash's blob. Lock-free. */
int pcache__prefetch_known(const pcache_device *device, const pcache__hash *hash);

/* A blob a prefetch brought: its state hash (16 bytes) and bytes (NULL
 * when its range was bad), from a reply or a segment. */
typedef struct pcache__prefetch_blob {
  const uint8_t *hash;
  const uint8_t *bytes;
  size_t size;
  uint64_t checksum;
} pcache__prefetch_blob;

/*
 * pcache__prefetch_merge - checks every blob not yet in the prefetched
 * set, merges the good ones with one vkMergePipelineCaches, adds their
 * hashes to the prefetched set and reports the bad ones to the daemon.
 * *ret_known (may be NULL): how many were in the set already. 0 or
 * -ENOMEM.
 */
int pcache__prefetch_merge(pcache_device *device, const pcache__prefetch_blob *blobs, size_t n,
                           size_t *ret_known);

/*
 * pcache__prefetch_page - one prefetch page from offset: asks on the
 * lane's connection within timeout_ms, checks every blob, merges the good
 * ones with one vkMergePipelineCaches, adds their hashes to the prefetched
 * set and reports the bad ones. Returns 0 with the offset of the next
 * page and whether the daemon has more, or the call's failure. ret_call_ns (may be
 * NULL): time spent waiting on the daemon for the page (not the checks and
 * merge, which are driver work).
 */
int pcache__prefetch_page(pcache_device *device, pcache__lane_id lane, uint32_t offset,
                          uint32_t timeout_ms, uint32_t *ret_next, int *ret_more,
                          uint64_t *ret_call_ns);

/*
 * pcache__prefetch_at_create - seeds the device cache page by page, from
 * start_offset (what a segment already brought, segment.h), within
 * the client's timeout (time waiting on the daemon; checks and merges are
 * driver work and do not count). Returns 1 with the offset the upload
 * thread should continue from, or 0 when nothing is left (done, disabled
 * through info->no_prefetch or PCACHE_NO_PREFETCH=1, or the daemon failed).
 */
int pcache__prefetch_at_create(pcache_device *device, const pcache_device_info *info,
                               uint32_t start_offset, uint32_t *ret_offset);

/* Prefetch is off: info->no_prefetch, or PCACHE_NO_PREFETCH=1. */
int pcache__prefetch_disabled(const pcache_device_info *info);

/*
 * pcache__prefetch_in_background - whether the start-up prefetch (the
 * segment's blobs and snapshot, then the pages) is the upload thread's,
 * from the driver's first miss, rather than pcache_device_create's
 * (upload.h, pcache__upload_prefetch_defer): on a driver whose own
 * caches answer the driver-first probe, a warm start never uses what the
 * prefetch loads into the device cache, and loading it was most of
 * pcache's start-up (docs/client.md "The start-up prefetch"). By default
 * on the vendors measured so (NVIDIA), with driver first on and no
 * PCACHE_STAGE=learn (whose first run needs to know at creation whether
 * the store had anything); PCACHE_PREFETCH=background or =now chooses.
 */
int pcache__prefetch_in_background(const pcache_device *device);

#endif
