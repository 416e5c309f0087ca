/* The device's shared-memory segment (segment.c): the (device, app)
 * snapshot and blobs pcached laid out once and every client of the app
 * maps read-only (proto/segment.h). */
#ifndef PCACHE_CLIENT_SEGMENT_H
#define PCACHE_CLIENT_SEGMENT_H

#include "client/core.h"
#include "proto/segment.h"

/* The (device, app) shared-memory segment, mapped once (at creation, or
 * by the upload thread just after), or NULL; read-only and unchanged
 * until the device is destroyed. */
typedef struct pcache__segment_state {
  /* Set once, with release order, by whoever fetches it (device creation,
   * or the upload thread on a driver-first device while the app already
   * builds): segment.c reads it with acquire order. */
  pcache__seg_map *_Atomic map;
  /* Per index entry of the segment: its blob was refused (checks or the
   * driver) and was reported; a miss then asks the daemon, not it again. */
  _Atomic unsigned char *refused;
  /* The segment's snapshot: PCACHE__SEG_SNAPSHOT_*. Loaded at creation
   * with the prefetch, or without one at the first miss it covers. */
  atomic_int snapshot;
} pcache__segment_state;

/*
 * pcache__segment_fetch - asks the daemon for the device's segment within
 * timeout_ms and maps it (device->segment.map). A segment that fails its
 * checks (proto/segment.h) is refused: logged, counted
 * (stats.segment_refused), and the socket serves instead. None at all
 * (an old daemon, no entries, PCACHE_NO_SEGMENT=1) is not an error.
 * Once a device: at its creation, or as the upload thread's first job
 * (pcache__upload_prefetch_defer), while app threads may already read it.
 * Returns -ETIMEDOUT when the daemon did not answer in time (slow, not
 * absent), else 0.
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

/* device->segment.snapshot: whether the segment's snapshot was loaded. */
enum {
  PCACHE__SEG_SNAPSHOT_UNTRIED = 0,
  PCACHE__SEG_SNAPSHOT_LOADING, /* one miss's thread is loading it */
  PCACHE__SEG_SNAPSHOT_LOADED,
  PCACHE__SEG_SNAPSHOT_NONE, /* none, snapshots off, or it was refused */
};

/*
 * pcache__segment_snapshot_on_miss - without a prefetch, the first miss
 * that the segment's snapshot covers loads the whole snapshot (checked as
 * at creation) and adds what it covers to the prefetched set, so this
 * miss and every later covered one need no blob of their own: the app's
 * whole cache in one vkCreatePipelineCache, as from its own cache file,
 * instead of one per pipeline. Once per device; a miss on another thread
 * meanwhile does not wait for the load (it loads its own blob), though
 * pipeline creation waits out the merge's hold of the device cache's
 * write lock, as for any merge. Any thread.
 */
void pcache__segment_snapshot_on_miss(pcache_device *device, const pcache__hash *hash);

/* 1 when the segment's snapshot, loaded here or being loaded by another
 * miss, covers hash: a blob of it merged meanwhile is no news for the
 * daemon's snapshot (no new one is due for it). Any thread. */
int pcache__segment_snapshot_holds(pcache_device *device, const pcache__hash *hash);

/*
 * pcache__segment_find - hash's blob in the mapped segment, checked
 * (checksum, header against the device) and loaded into a cache of its
 * own: 1 with *ret_cache, 0 when the segment has no such blob (or there
 * is no segment) or it failed its checks (reported as a blob from the
 * socket would be). Lock-free; any thread.
 */
int pcache__segment_find(pcache_device *device, const pcache__hash *hash,
                         VkPipelineCache *ret_cache);

/* Whether the daemon holds hash's blob for this (device, app) as far as
 * the context knows without asking: prefetched (merged), or listed by the
 * mapped segment and not refused (a prefetch left to the upload thread
 * has merged nothing yet: pcache__prefetch_in_background). A driver hit
 * of such a pipeline is a use to report, and no news to stage. Nothing is
 * loaded. Lock-free; any thread. */
int pcache__segment_known(pcache_device *device, const pcache__hash *hash);

/* Marks hash's blob in the segment refused (the driver would not merge
 * it): later misses ask the daemon. */
void pcache__segment_refuse(pcache_device *device, const pcache__hash *hash);

/* Unmaps the segment (device destruction). */
void pcache__segment_release(pcache_device *device);

#endif
