/* The device's shared-memory segment: fetched once, at device creation or
 * (driver first, the daemon's blobs off a warm start's path) by the upload
 * thread right after it, mapped read-only, never changed after (a newer
 * one from the daemon is for the next device context; this mapping stays
 * valid however the daemon replaces or drops its own). Nothing from it
 * reaches the driver before pcache__blob_load's checks: the tables are
 * checked whole when mapped, each blob when used. */
#include <errno.h>
#include <time.h>
#include <stdlib.h>

#include "client/device.h"
#include "client/blobs.h"
#include "client/prefetch.h"
#include "client/segment.h"
#include "client/snapshot.h"
#include "common/alloc.h"

/* The mapping and its refused flags are written before it is published. */
static pcache__seg_map *seg_map(const pcache_device *d) {
  return atomic_load_explicit(&((pcache_device *)d)->segment.map, memory_order_acquire);
}

static int segments_disabled(void) {
  const char *env = getenv("PCACHE_NO_SEGMENT");
  return env && env[0] == '1';
}

int pcache__segment_fetch(pcache_device *d, uint32_t timeout_ms) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Segment sg = PCACHEPB__SEGMENT__INIT;
  pcache__reply reply = {0};
  pcache__seg_map *m;
  const char *why = "";
  int r, ok;
  if (!d->core.client || segments_disabled() || seg_map(d))
    return 0;
  sg.device_key.data = d->core.key.bytes;
  sg.device_key.len = PCACHE_DEVKEY_SIZE;
  sg.app = d->core.client->app_name;
  sg.lease = 1; /* held while mapped: the daemon counts the segment until then */
  request.body_case = PCACHEPB__REQUEST__BODY_SEGMENT;
  request.segment = &sg;
  /* An older daemon answers PCACHE_EUNKNOWN_REQUEST: no segment. */
  r = pcache__client_rpc(d->core.client, PCACHE__LANE_APP, &request,
                         PCACHEPB__RESPONSE__BODY_SEGMENT, timeout_ms, &reply);
  if (r == -ETIMEDOUT)
    goto out;
  /* Anything but the answer (a refusal, out of step): no segment. */
  ok = r == 0 && reply.response && reply.has_passed_fd;
  r = 0;
  if (!ok)
    goto out;
  m = pcache__calloc(1, sizeof *m);
  if (!m)
    goto out;
  /* Not populated: an app reads the snapshot and the blobs it lacks, and
   * with a snapshot that is a few MiB of a segment that may hold hundreds.
   * Populating all of it made a 2048-pipeline start's device creation
   * take 6-14 ms on the H100 instead of 0.7 (bench/RESULTS.md,
   * 2026-11-27, session 8); pages read come in as they are touched, a
   * fault per 16 of them. */
  r = pcache__seg_map_open(reply.passed_fd, reply.response->segment->size, &d->core.key, 0, m,
                           &why);
  if (r < 0) {
    static const char site[] = "refused_segment";
    atomic_fetch_add(&d->core.stats.segment_refused, 1);
    pcache__log_limited(d->core.log, PCACHE_SEVERITY_WARNING, site, 0, 0,
                        "the shared-memory segment from pcached was refused (%s); its "
                        "blobs come over the socket instead",
                        r == PCACHE_EPROTO ? why : pcache_strerror(r));
    pcache__free(m);
    r = 0;
    goto out;
  }
  if (reply.has_lease_fd) {
    m->lease_fd = reply.lease_fd; /* closed with the mapping */
    reply.has_lease_fd = 0;
  }
  d->segment.refused = pcache__calloc(m->seg.n_entries ? m->seg.n_entries : 1, 1);
  if (!d->segment.refused) {
    pcache__seg_map_close(m);
    pcache__free(m);
    goto out;
  }
  atomic_store_explicit(&d->segment.map, m, memory_order_release);
out:
  pcache__reply_release(&reply); /* the mapping outlives the memfd */
  return r;
}

/* The index position of a blob whose hash points into the index. */
static size_t index_of(const pcache__seg *seg, const uint8_t *hash) {
  return (size_t)(hash - seg->index) / PCACHE_SEG_INDEX_ENTRY;
}

/* Loads the segment's snapshot into the device cache (swapped in during
 * creation, merged after) and adds what it covers to the prefetched set.
 * 1 when loaded, 0 when there is none or it was refused (reported). */
static int load_snapshot(pcache_device *d, const pcache__seg *seg) {
  size_t covered = 0;
  if (d->core.no_snapshot || !seg->snapshot ||
      pcache__snapshot_load_blob(d, seg->snapshot, seg->snapshot_size, seg->snapshot_checksum) <
          0) {
    atomic_store(&d->segment.snapshot, PCACHE__SEG_SNAPSHOT_NONE);
    return 0;
  }
  for (uint32_t i = 0; i < seg->n_snap_hashes; i++)
    covered += (size_t)pcache__snapshot_covers(d, seg->snap_hashes + (size_t)i * 16);
  pcache__table_publish(&d->core.prefetched);
  atomic_fetch_add(&d->core.stats.prefetched, covered);
  atomic_store(&d->core.stats.snapshot_loaded, covered);
  atomic_store(&d->segment.snapshot, PCACHE__SEG_SNAPSHOT_LOADED);
  return 1;
}

int pcache__segment_prefetch(pcache_device *d, uint32_t *ret_offset) {
  pcache__seg_map *m = seg_map(d);
  const pcache__seg *seg = m ? &m->seg : NULL;
  pcache__prefetch_blob *blobs;
  uint32_t n;
  int snapshot_loaded;
  *ret_offset = 0;
  int untried = PCACHE__SEG_SNAPSHOT_UNTRIED;
  if (!seg)
    return 0;
  /* Once: when the upload thread does this (a background prefetch), the
   * miss that handed it over has usually begun loading the snapshot
   * itself (snapshot_on_miss). The upload thread then waits for that
   * load rather than merge every blob the snapshot covers a second time,
   * list them all for a new snapshot, and fetch every page again. */
  if (atomic_compare_exchange_strong(&d->segment.snapshot, &untried,
                                     PCACHE__SEG_SNAPSHOT_LOADING)) {
    snapshot_loaded = load_snapshot(d, seg);
  } else {
    /* A load is a few ms of driver work; the bound only keeps a driver
     * that never returns from holding this thread for ever. */
    for (int i = 0; i < 20000 && atomic_load(&d->segment.snapshot) == PCACHE__SEG_SNAPSHOT_LOADING;
         i++)
      (void)nanosleep(&(struct timespec){.tv_nsec = 500000}, NULL);
    snapshot_loaded = atomic_load(&d->segment.snapshot) == PCACHE__SEG_SNAPSHOT_LOADED;
  }
  /* With the snapshot, the blobs it does not cover (they come first);
   * without it, all of them. */
  n = snapshot_loaded ? seg->n_uncovered : seg->n_entries;
  blobs = pcache__calloc(n ? n : 1, sizeof *blobs);
  if (!blobs)
    return 0;
  for (uint32_t i = 0; i < n; i++) {
    pcache__seg_blob b;
    pcache__seg_at(seg, i, &b);
    blobs[i] = (pcache__prefetch_blob){b.hash, b.data, (size_t)b.size, b.checksum};
  }
  (void)pcache__prefetch_merge(d, blobs, n, NULL);
  /* What did not join the prefetched set was refused (and reported). */
  for (uint32_t i = 0; i < n; i++) {
    uint64_t k0, k1;
    pcache__hash_keys(blobs[i].hash, &k0, &k1);
    if (!pcache__table_find(&d->core.prefetched, k0, k1))
      atomic_store(&d->segment.refused[index_of(seg, blobs[i].hash)], 1);
  }
  pcache__free(blobs);
  /* A socket prefetch's offset counts the blobs before (the snapshot's
   * are not in its order): pages are sets, so an order changed since only
   * repeats what the set already has. */
  *ret_offset = snapshot_loaded ? seg->n_uncovered : 0;
  return snapshot_loaded == !d->core.no_snapshot && (seg->flags & PCACHE_SEG_COMPLETE) &&
         (snapshot_loaded || !seg->snapshot);
}

int pcache__segment_known(pcache_device *d, const pcache__hash *hash) {
  pcache__seg_map *m = seg_map(d);
  pcache__seg_blob b;
  if (pcache__prefetch_known(d, hash))
    return 1;
  if (!m || !pcache__seg_find(&m->seg, hash->bytes, &b))
    return 0;
  return !atomic_load(&d->segment.refused[index_of(&m->seg, b.hash)]);
}

void pcache__segment_snapshot_on_miss(pcache_device *d, const pcache__hash *hash) {
  int untried = PCACHE__SEG_SNAPSHOT_UNTRIED;
  pcache__seg_map *m = seg_map(d);
  pcache__seg_blob b;
  if (!m || atomic_load(&d->segment.snapshot) != PCACHE__SEG_SNAPSHOT_UNTRIED)
    return;
  if (!pcache__seg_find(&m->seg, hash->bytes, &b) || !(b.flags & PCACHE_SEG_COVERED))
    return;
  if (atomic_compare_exchange_strong(&d->segment.snapshot, &untried, PCACHE__SEG_SNAPSHOT_LOADING))
    (void)load_snapshot(d, &m->seg);
}

int pcache__segment_snapshot_holds(pcache_device *d, const pcache__hash *hash) {
  int state = atomic_load(&d->segment.snapshot);
  pcache__seg_map *m = seg_map(d);
  pcache__seg_blob b;
  return m && (state == PCACHE__SEG_SNAPSHOT_LOADING || state == PCACHE__SEG_SNAPSHOT_LOADED) &&
         pcache__seg_find(&m->seg, hash->bytes, &b) && (b.flags & PCACHE_SEG_COVERED);
}

int pcache__segment_find(pcache_device *d, const pcache__hash *hash, VkPipelineCache *ret_cache) {
  Pcachepb__ReportReason reason = 0;
  pcache__seg_map *m = seg_map(d);
  pcache__seg_blob b;
  size_t at;
  if (!m || !pcache__seg_find(&m->seg, hash->bytes, &b))
    return 0;
  at = index_of(&m->seg, b.hash);
  if (atomic_load(&d->segment.refused[at]))
    return 0;
  if (pcache__blob_load(d, b.data, (size_t)b.size, b.checksum, ret_cache, &reason) == 0)
    return 1;
  atomic_store(&d->segment.refused[at], 1);
  {
    Pcachepb__ReportItem item = PCACHEPB__REPORT_ITEM__INIT;
    const Pcachepb__ReportItem *items[1] = {&item};
    atomic_fetch_add(&d->core.stats.rejected_blobs, 1);
    item.state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)hash->bytes};
    item.reason = reason;
    pcache__blob_report(d, items, 1);
  }
  return 0;
}

void pcache__segment_refuse(pcache_device *d, const pcache__hash *hash) {
  pcache__seg_map *m = seg_map(d);
  pcache__seg_blob b;
  if (m && pcache__seg_find(&m->seg, hash->bytes, &b))
    atomic_store(&d->segment.refused[index_of(&m->seg, b.hash)], 1);
}

/* After the upload thread has stopped: nobody else reads it then. */
void pcache__segment_release(pcache_device *d) {
  pcache__seg_map *m = seg_map(d);
  if (!m)
    return;
  pcache__seg_map_close(m);
  pcache__free(m);
  pcache__free((void *)d->segment.refused);
  atomic_store(&d->segment.map, NULL);
  d->segment.refused = NULL;
}
