/* Reports of uses and of refused blobs: see reports.h. */
#include <string.h>

#include "client/device.h"
#include "client/client.h"
#include "client/reports.h"
#include "common/alloc.h"
#include "common/clock.h"

/* Uses of prefetched pipelines wait for one Report this long, or until a
 * Report's worth is queued: a warm start's pipelines arrive every 15-20
 * us on NVIDIA, and a Report for each woke this thread and pcached's
 * writer while the program was still loading. A use is only the entry's
 * place in the LRU; a flush sends them at once. */
#define USED_DELAY_MS 250u
#define USED_BATCH 1024u

void pcache__report_send(pcache_device *d, Pcachepb__Report *report) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  pcache__reply reply = {0};
  report->device_key.data = (uint8_t *)pcache__device_wire_key(&d->core)->bytes;
  report->device_key.len = PCACHE_DEVKEY_SIZE;
  request.body_case = PCACHEPB__REQUEST__BODY_REPORT;
  request.report = report;
  (void)pcache__client_rpc(d->core.client, PCACHE__LANE_BACKGROUND, &request,
                           PCACHEPB__RESPONSE__BODY_REPORT,
                           pcache__client_background_timeout_ms(d->core.client), &reply);
  pcache__reply_release(&reply);
}

void pcache__refused_queue(pcache_device *d, const Pcachepb__ReportItem *const *items, size_t n) {
  pthread_mutex_lock(&d->upload.lock);
  for (size_t i = 0; i < n && d->upload.refused.n < PCACHE__REFUSED_MAX; i++) {
    pcache__refused r = {.reason = (uint32_t)items[i]->reason};
    if (items[i]->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    memcpy(r.hash.bytes, items[i]->state_hash.data, PCACHE_HASH_SIZE);
    /* Out of memory: this one goes unreported. */
    (void)pcache_vec_push(&d->upload.refused, r);
  }
  pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
}

void pcache__refused_snapshot_queue(pcache_device *d, Pcachepb__ReportReason reason,
                                    uint64_t checksum) {
  pthread_mutex_lock(&d->upload.lock);
  d->upload.refused_snapshot = (uint32_t)reason;
  d->upload.refused_snapshot_checksum = checksum;
  pthread_cond_signal(&d->upload.wake);
  pthread_mutex_unlock(&d->upload.lock);
}

int pcache__refused_queued_locked(const pcache_device *d) {
  return d->upload.refused.n > 0 || d->upload.refused_snapshot != 0;
}

int pcache__refused_pending_locked(const pcache_device *d) {
  return pcache__refused_queued_locked(d) || d->upload.refused_in_flight;
}

void pcache__refused_send_locked(pcache_device *d) {
  Pcachepb__Report report = PCACHEPB__REPORT__INIT;
  Pcachepb__ReportItem *items, **ptrs;
  pcache__refused *taken;
  size_t n = d->upload.refused.n;
  uint32_t snapshot = d->upload.refused_snapshot;
  uint64_t snapshot_checksum = d->upload.refused_snapshot_checksum;
  if (!pcache__refused_queued_locked(d))
    return;
  taken = d->upload.refused.items;
  d->upload.refused.items = NULL;
  d->upload.refused.n = d->upload.refused.cap = 0;
  d->upload.refused_snapshot = 0;
  d->upload.refused_in_flight = 1;
  pthread_mutex_unlock(&d->upload.lock);
  items = pcache__calloc(n ? n : 1, sizeof *items);
  ptrs = pcache__calloc(n ? n : 1, sizeof *ptrs);
  if (items && ptrs) {
    for (size_t i = 0; i < n; i++) {
      pcachepb__report_item__init(&items[i]);
      items[i].state_hash.data = taken[i].hash.bytes;
      items[i].state_hash.len = PCACHE_HASH_SIZE;
      items[i].reason = (Pcachepb__ReportReason)taken[i].reason;
      ptrs[i] = &items[i];
    }
    report.items = n ? ptrs : NULL;
    report.n_items = n;
    if (snapshot) {
      report.snapshot = (Pcachepb__ReportReason)snapshot;
      report.snapshot_checksum = snapshot_checksum;
      report.app = d->core.client->app_name;
    }
    pcache__report_send(d, &report);
  }
  pcache__free(ptrs);
  pcache__free(items);
  pcache__free(taken);
  pthread_mutex_lock(&d->upload.lock);
  d->upload.refused_in_flight = 0;
  pthread_cond_broadcast(&d->upload.drained);
}

void pcache__used_queue(pcache_device *d, const pcache__hash *state_hash) {
  if (!d->upload.running)
    return;
  pthread_mutex_lock(&d->upload.lock);
  /* Bounded like the upload queue: a daemon away for long loses hits. The
   * thread hears of the first (it times the wait from it) and of a
   * Report's worth, not of each. */
  if (d->upload.used.n < PCACHE__UPLOAD_QUEUE_MAX &&
      pcache_vec_push(&d->upload.used, *state_hash) == 0) {
    if (d->upload.used.n == 1)
      d->upload.used_since_ms = pcache__mono_ms();
    if (d->upload.used.n == 1 || d->upload.used.n == USED_BATCH)
      pthread_cond_signal(&d->upload.wake);
  }
  pthread_mutex_unlock(&d->upload.lock);
}

int pcache__used_due_locked(const pcache_device *d, uint64_t *ret_wait_ms) {
  uint64_t now = pcache__mono_ms(), due = d->upload.used_since_ms + USED_DELAY_MS;
  *ret_wait_ms = due > now ? due - now : 0;
  return d->upload.used_now || d->upload.used.n >= USED_BATCH || now >= due;
}

void pcache__used_send_locked(pcache_device *d) {
  Pcachepb__Report report = PCACHEPB__REPORT__INIT;
  ProtobufCBinaryData *hashes;
  pcache__hash *taken;
  size_t n, max;
  d->upload.used_in_flight = 1;
  pthread_mutex_unlock(&d->upload.lock);
  max = pcache__client_max_hashes(d->core.client);
  pthread_mutex_lock(&d->upload.lock);
  n = d->upload.used.n < max ? d->upload.used.n : max;
  taken = pcache__malloc(n * (sizeof *taken + sizeof *hashes));
  if (taken) {
    memcpy(taken, d->upload.used.items, n * sizeof *taken);
    memmove(d->upload.used.items, d->upload.used.items + n, (d->upload.used.n - n) * sizeof *taken);
    d->upload.used.n -= n;
  } else {
    d->upload.used.n = 0; /* hits lost, nothing else */
  }
  pthread_mutex_unlock(&d->upload.lock);
  if (taken) {
    hashes = (ProtobufCBinaryData *)(taken + n);
    for (size_t i = 0; i < n; i++)
      hashes[i] = (ProtobufCBinaryData){.len = PCACHE_HASH_SIZE, .data = taken[i].bytes};
    report.used = hashes;
    report.n_used = n;
    pcache__report_send(d, &report);
    pcache__free(taken);
  }
  pthread_mutex_lock(&d->upload.lock);
  d->upload.used_in_flight = 0;
  pthread_cond_broadcast(&d->upload.drained);
}
