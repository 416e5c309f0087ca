/* The upload thread's part of the start-up prefetch (docs/client.md, "The
 * start-up prefetch"): the segment a driver-first device did not map at
 * creation, the segment's blobs and the pages that creation left, or all
 * of them from the driver's first miss; and the calls that hand each of
 * them over. Each runs before any upload: uploads are of pipelines these
 * blobs might have spared. */
#include <time.h>

#include "client/device.h"
#include "client/prefetch.h"
#include "client/segment.h"
#include "client/upload.h"
#include "common/clock.h"

#define PREFETCH_TRIES 3
/* A failed call leaves the client waiting this long before it reconnects
 * (client.c); trying sooner would just be refused. */
#define PREFETCH_RETRY_MS 1100u

/* The prefetch pages device creation had no time for, before any upload
 * (uploads are of pipelines these pages might have spared). With the
 * lock held; drops it while a page is fetched and merged. */
static void prefetch_rest(pcache_device *d) {
  int tries = 0;
  if (d->upload.prefetch_segment) {
    uint32_t offset = 0;
    int complete;
    d->upload.prefetch_segment = 0;
    pthread_mutex_unlock(&d->upload.lock);
    /* What device creation does otherwise (device.c): the mapped segment
     * first, and pages only for what it did not hold. */
    complete = pcache__segment_prefetch(d, &offset);
    pthread_mutex_lock(&d->upload.lock);
    d->upload.prefetch_offset = offset;
    if (complete)
      d->upload.prefetch_pending = 0;
  }
  while (d->upload.prefetch_pending && !d->upload.stop) {
    uint32_t offset = d->upload.prefetch_offset, next = offset;
    uint64_t retry_at;
    int more = 0, r;
    pthread_mutex_unlock(&d->upload.lock);
    /* The app's connection, where the first pages went: the daemon keeps
     * a prefetch's page order per connection (daemon/prefetch_cursor.h),
     * so the rest continues it rather than sorting the entries again. A
     * prefetch left to the driver's first miss began no order there, and
     * takes the background connection, where no app thread's Get waits
     * behind its pages. The background timeout: nobody waits on it, and
     * pcache__upload_stop cancels it (a Get that races it waits no longer
     * than its own timeout). */
    r = pcache__prefetch_page(
        d, d->upload.prefetch_background_lane ? PCACHE__LANE_BACKGROUND : PCACHE__LANE_APP, offset,
        pcache__client_background_timeout_ms(d->core.client), &next, &more, NULL);
    pthread_mutex_lock(&d->upload.lock);
    if (r == 0) {
      tries = 0;
      d->upload.prefetch_offset = next;
      d->upload.prefetch_pending = more;
      continue;
    }
    /* A daemon that refuses us (another version, a full house) will again. */
    if (r == PCACHE_EDISABLED || r == PCACHE_EVERSION || r == PCACHE_EPEER ||
        r == PCACHE_ETOO_MANY_CONNECTIONS || ++tries >= PREFETCH_TRIES) {
      d->upload.prefetch_pending = 0; /* misses ask the daemon one by one instead */
      break;
    }
    retry_at = pcache__mono_ms() + PREFETCH_RETRY_MS;
    while (!d->upload.stop && pcache__mono_ms() < retry_at) {
      struct timespec ts;
      pcache__timespec_in(CLOCK_MONOTONIC, retry_at - pcache__mono_ms(), &ts);
      pthread_cond_timedwait(&d->upload.wake, &d->upload.lock, &ts);
    }
  }
}

void pcache__upload_prefetch_locked(pcache_device *d) {
  if (d->upload.segment_wanted) {
    /* Before a prefetch, which reads it; the app's lane and timeout, as
     * at creation: a miss's Get waits behind it at most that. */
    d->upload.segment_wanted = 0;
    pthread_mutex_unlock(&d->upload.lock);
    (void)pcache__segment_fetch(d, d->core.client->timeout_ms);
    pthread_mutex_lock(&d->upload.lock);
    return;
  }
  if (d->upload.prefetch_pending)
    prefetch_rest(d);
}

void pcache__upload_prefetch_rest(pcache_device *d, uint32_t offset) {
  pthread_mutex_lock(&d->upload.lock);
  d->upload.prefetch_offset = offset;
  d->upload.prefetch_pending = 1;
  pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
}

void pcache__upload_prefetch_defer(pcache_device *d) {
  atomic_store(&d->upload.prefetch_deferred, 1);
  pthread_mutex_lock(&d->upload.lock);
  d->upload.segment_wanted = 1;
  pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
}

void pcache__upload_prefetch_on_miss(pcache_device *d) {
  if (!atomic_load_explicit(&d->upload.prefetch_deferred, memory_order_relaxed) ||
      !atomic_exchange(&d->upload.prefetch_deferred, 0))
    return;
  pthread_mutex_lock(&d->upload.lock);
  d->upload.prefetch_segment = 1;
  d->upload.prefetch_background_lane = 1;
  pthread_mutex_unlock(&d->upload.lock);
  pcache__upload_prefetch_rest(d, 0);
}
