/* Prefetch (prefetch.c). */
#ifndef PCACHE_CLIENT_PREFETCH_H
#define PCACHE_CLIENT_PREFETCH_H

#include "client/device.h"

/* Whether a prefetch (or the loaded snapshot) merged hash's blob. Lock-free. */
int pcache__prefetch_known(const pcache_device *device, const pcache__hash *hash);

/*
 * pcache__prefetch_page - one prefetch page from offset: asks within
 * timeout_ms, checks every blob, merges the good ones with one
 * vkMergePipelineCaches, adds their hashes to the prefetched set and
 * reports the bad ones. Returns 0 with the offset of the next page and
 * whether the daemon has more, or the call's failure. ret_call_ns (may be
 * NULL): time spent waiting on the daemon for the page (not the checks and
 * merge, which are driver work).
 */
int pcache__prefetch_page(pcache_device *device, uint32_t offset, uint32_t timeout_ms,
                          uint32_t *ret_next, int *ret_more, uint64_t *ret_call_ns);

/*
 * pcache__prefetch_at_create - seeds the device cache page by page within
 * the client's timeout (time waiting on the daemon; checks and merges are
 * driver work and do not count). Returns 1 with the offset the upload
 * thread should continue from, or 0 when nothing is left (done, disabled
 * through info->no_prefetch or PCACHE_NO_PREFETCH=1, or the daemon failed).
 */
int pcache__prefetch_at_create(pcache_device *device, const pcache_device_info *info,
                               uint32_t *ret_offset);

#endif
