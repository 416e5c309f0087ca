/* Shared-memory segments (segment.c; docs/protocol.md "Segment",
 * docs/storage.md "Segments"): one sealed memfd per (device, app) holding
 * the app's snapshot and blobs with a checked index, built once after the
 * app's entries change and handed to every client of the app. A segment
 * is never written after it is sealed: a change builds a new one, and
 * clients that mapped the old one keep reading it. What the daemon holds
 * is bounded by --segment-memory (least recently handed out dropped
 * first) and dropped after --segment-idle without a request.
 *
 * A segment a client maps outlives the daemon's own descriptor: it is
 * still this daemon's shared memory. So each segment has a lease, a pipe
 * whose write end every client that asked for one holds while it maps
 * the segment (libpcache closes it when it unmaps, the kernel when the
 * client dies). A segment the daemon replaced or dropped stays counted
 * against --segment-memory, as retired, until its pipe hangs up. */
#ifndef PCD_SEGMENT_H
#define PCD_SEGMENT_H

#include <stdint.h>

#include "config.h"
#include "store.h"

typedef struct pcd_segments pcd_segments;

/* Counters for Stats. */
typedef struct pcd_segment_stats {
  uint64_t segments, bytes, builds, drops, sent;
  uint64_t retired, retired_bytes; /* replaced or dropped, still mapped by a client */
} pcd_segment_stats;

/* What a request gets: fd (a new descriptor, the caller's to close) and
 * what the SegmentReply says; fd -1 and size 0 when there is none. */
typedef struct pcd_segment_got {
  int fd;
  int lease_fd; /* with lease asked for: the lease's write end (the caller's); else -1 */
  uint64_t size, generation;
  uint32_t entries;
  int complete;
  /* Entry keys (PCD_ENTRY_KEY_SIZE each) whose blob failed its checksum
   * in the build: left out, for the caller to drop as a Get would (free
   * with pcache__free). */
  uint8_t *bad_keys;
  size_t n_bad;
} pcd_segment_got;

/* A registry for config's --segment-memory and --segment-idle. 0 or
 * -ENOMEM. */
int pcd_segments_new(const pcd_config *config, pcd_segments **ret_segments);
void pcd_segments_free(pcd_segments *segments);

/*
 * pcd_segments_get - the segment of (devkey, app) as the store is now:
 * the one held when no commit has changed the app's entries or snapshot
 * since it was built, else a new one, built here (on the calling thread,
 * one build at a time) and held in place of the old one. now_us is
 * monotonic. With lease set, *ret carries a lease descriptor too (see
 * above). Returns 0 with *ret (fd -1 when the app has no entries on the
 * device, segments are off, or nothing fits beside what is held and what
 * clients still map), or a negative code.
 * Any thread.
 */
int pcd_segments_get(pcd_segments *segments, pcd_store *store, const uint8_t *devkey,
                     const char *app, int lease, uint64_t now_us, pcd_segment_got *ret);

/*
 * pcd_segments_ready - the held segment of (devkey, app) when it is
 * current, as pcd_segments_get; when it is not, *ret has fd -1 at once
 * and the segment is built on the registry's builder thread, for a later
 * request: a client never waits on a build (one of 200 MB takes 100-400
 * ms, longer than a client's timeout). 0 or a negative code. Any thread.
 */
int pcd_segments_ready(pcd_segments *segments, pcd_store *store, const uint8_t *devkey,
                       const char *app, int lease, uint64_t now_us, pcd_segment_got *ret);

/* Stops the builder thread (waiting for a build under way): before the
 * store closes. pcd_segments_free does it too. */
void pcd_segments_stop(pcd_segments *segments);

/* Drops the segments not handed out since now_us - --segment-idle. */
void pcd_segments_expire(pcd_segments *segments, uint64_t now_us);

void pcd_segments_stats(pcd_segments *segments, pcd_segment_stats *ret_stats);

#endif
