/* The upload thread (upload.c): one per device context that may reach a
 * daemon. It sends compiled pipelines (Put), fetches the prefetch pages
 * device creation had no time for, and uploads snapshots. */
#ifndef PCACHE_CLIENT_UPLOAD_H
#define PCACHE_CLIENT_UPLOAD_H

#include "client/core.h"
#include "proto/put_batch.h"

typedef struct pcache__upload {
  /* First, so that the batcher's queue holds these (proto/put_batch.h).
   * put.stage: a staged build (Put.stage): blob is empty, the daemon's
   * replayer builds it (build.h, "Staging"). put.app is NULL: the
   * client's. */
  pcache__put_item put;
  size_t n_modules;
  pcache__module *modules[PCACHE_DESC_MAX_MODULES];
  int force_code; /* the daemon said it lacks a module: send all code */
} pcache__upload;

/* A refused blob's report, queued for the upload thread (reports.h). */
typedef struct pcache__refused {
  pcache__hash hash;
  uint32_t reason; /* Pcachepb__ReportReason */
} pcache__refused;
#define PCACHE__REFUSED_MAX 4096u

/* The upload queue's bound in items, which the uses queued for a Report
 * (reports.c) share: a daemon away for long costs the app no more. */
#define PCACHE__UPLOAD_QUEUE_MAX 4096u

/* The upload thread and everything queued for it, all under lock (only
 * when a client may reach a daemon). */
typedef struct pcache__uploader {
  pthread_mutex_t lock;
  pthread_cond_t wake;    /* work arrived, or stop */
  pthread_cond_t drained; /* queue drained */
  /* The queue, bounded in items and bytes (PCACHE__UPLOAD_QUEUE_MAX and
   * upload.c's QUEUE_MAX_BYTES); a batch never mixes staged builds with
   * others. */
  pcache__put_batcher batcher;
  size_t in_flight;  /* items in the batch being sent */
  uint64_t failures; /* batches the daemon did not take (away, slow, refused) */
  /* Answers out of step in a row (another kind to a Put): the upload
   * thread's alone. A daemon that never answers in step cannot hold the
   * head of the queue for ever. */
  unsigned out_of_step;
  int stop, running;
  int retry_now; /* a flush wants the next try now, not after the backoff */
  pthread_t thread;
  int cancel_fd; /* eventfd: written at stop, ends the thread's call in flight */
  /* Prefetch pages the device creation had no time for: the upload thread
   * fetches them, from prefetch_offset, before any upload. */
  int prefetch_pending;
  uint32_t prefetch_offset;
  /* The whole prefetch is the thread's (pcache__prefetch_in_background):
   * the segment's blobs and snapshot first, then pages. */
  int prefetch_segment;
  /* Mapping the segment is the thread's first job, not creation's
   * (pcache__upload_prefetch_defer). */
  int segment_wanted;
  /* ...and it waits for the driver's first miss (prefetch_on_miss), and
   * then goes over the background connection: no Prefetch began on the
   * app's at creation, and an app thread's Get must not wait behind a
   * page. */
  atomic_int prefetch_deferred;
  int prefetch_background_lane;
  int snapshot_wanted; /* flush/destroy asked for a snapshot upload */
  int snapshot_in_flight;
  /* State hashes of prefetched blobs that pipelines were built from, for
   * the next Report (used, reports.h): the daemon counts a use only when
   * told. */
  PCACHE_VEC(pcache__hash) used;
  int used_in_flight;
  /* When the first of them was queued (monotonic ms), and whether a flush
   * wants them sent now: they go in one Report per USED_DELAY_MS, not one
   * per pipeline (reports.c). */
  uint64_t used_since_ms;
  int used_now;
  /* Reports of refused blobs, for the next Report (reports.c). */
  PCACHE_VEC(pcache__refused) refused;
  uint32_t refused_snapshot;          /* a Pcachepb__ReportReason; 0: none to report */
  uint64_t refused_snapshot_checksum; /* the refused one's, so a newer one stays */
  int refused_in_flight;
  PCACHE_VEC(pcache__hash) sent_modules; /* module hashes the daemon acknowledged */
} pcache__uploader;

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
/* The upload thread's prefetch job, segment_wanted's or prefetch_pending's
 * (upload_prefetch.c). With the upload lock held; drops it while the
 * daemon answers and blobs are merged. */
void pcache__upload_prefetch_locked(pcache_device *device);
/* Hands the prefetch pages from offset on to the upload thread. */
void pcache__upload_prefetch_rest(pcache_device *device, uint32_t offset);
/* The whole prefetch, the segment's part first, is the upload thread's
 * once the driver first misses (pcache__prefetch_in_background): a warm
 * start, which the driver's own caches serve, never loads it.
 * pcache__upload_prefetch_on_miss hands it over, once; any thread. The
 * segment itself the thread maps at once (pcache__segment_fetch), so that
 * uses of what the store holds are reported and a miss finds its blob
 * there, while the program's start waits for no round trip. */
void pcache__upload_prefetch_defer(pcache_device *device);
void pcache__upload_prefetch_on_miss(pcache_device *device);
/* Asks the upload thread for a snapshot upload when the device cache
 * changed since the loaded snapshot (after the queued pipelines). */
void pcache__upload_want_snapshot(pcache_device *device);

#endif
