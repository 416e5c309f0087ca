/* The (device, app) snapshot (snapshot.c). */
#ifndef PCACHE_CLIENT_SNAPSHOT_H
#define PCACHE_CLIENT_SNAPSHOT_H

#include "client/core.h"

/* What the device cache holds, for the (device, app) snapshot: the state
 * hashes merged into it (the loaded snapshot's, prefetched and fetched
 * blobs, compiles), and whether any came after the snapshot loaded at
 * creation (dirty: worth uploading a new one). Appended after the merge
 * that brought the hash in, so a copy of the list taken under the cache
 * lock's read side names only what the cache data holds. */
typedef struct pcache__snapshot_state {
  pthread_mutex_t lock;
  PCACHE_VEC(pcache__hash) held;
  int dirty;
  /* A snapshot was refused here: later prefetch pages ask for none,
   * since its report, sent by the upload thread, may not have reached the
   * daemon yet and the same one would come again. */
  atomic_int refused;
} pcache__snapshot_state;

/* Records that the device cache now holds hash's pipeline (after the
 * merge); dirty: it came after the loaded snapshot, so a new snapshot is
 * worth uploading. */
void pcache__snapshot_hold(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE], int dirty);

/*
 * pcache__snapshot_load - loads the snapshot of the first prefetch page. At
 * creation the (still empty) device cache is replaced by one made straight
 * from it: one vkCreatePipelineCache, as an app loading its own cache file
 * does. Later (the first page came late, on the upload thread, and the app
 * may hold the cache handle) it is merged in. Its hashes join the
 * prefetched set so misses on them never ask the daemon. A snapshot that
 * fails the checks or that the driver refuses is reported, and its hashes
 * are left to the usual per-miss Gets.
 */
void pcache__snapshot_load(pcache_device *device, const pcache__reply *reply,
                           const Pcachepb__GetReply *got);

/* The blob part of pcache__snapshot_load, for a snapshot from a reply or a
 * segment: 0 when the device cache now holds it, -EINVAL when it was
 * refused (reported). */
int pcache__snapshot_load_blob(pcache_device *device, const uint8_t *bytes, size_t size,
                               uint64_t checksum);
/* A hash the loaded snapshot covers joins the prefetched set (published
 * by the caller); 1 when it was new. */
int pcache__snapshot_covers(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE]);

/* Upload thread: one PutSnapshot of the device cache when anything was
 * added since the loaded snapshot. 0, or <0 to try again later. */
int pcache__snapshot_upload(pcache_device *device);

#endif
