/* The (device, app) snapshot: the list of state hashes the device cache
 * holds, loading the snapshot the first prefetch page brings, and
 * uploading a new one when the cache gained anything since
 * (docs/client.md, "Snapshots"). */
#include <errno.h>
#include <stdlib.h>

#include "client/device.h"
#include "client/blobs.h"
#include "client/reports.h"
#include "client/snapshot.h"
#include "common/alloc.h"

/* Callers hold each hash once: build.c calls this only the first time the
 * device cache gets a pipeline (a compile, a first Get, a prefetch page),
 * never for a pipeline it builds again. */
void pcache__snapshot_hold(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE], int dirty) {
  pcache__hash h;
  memcpy(h.bytes, hash, PCACHE_HASH_SIZE);
  pthread_mutex_lock(&device->snapshot.lock);
  /* Out of memory: left out of the next snapshot; a warm run compiles or
   * fetches it again, which marks the context dirty again. */
  (void)pcache_vec_push(&device->snapshot.held, h);
  device->snapshot.dirty |= dirty;
  pthread_mutex_unlock(&device->snapshot.lock);
}

static int hash_cmp(const void *a, const void *b) { return memcmp(a, b, PCACHE_HASH_SIZE); }

int pcache__snapshot_load_blob(pcache_device *device, const uint8_t *bytes, size_t size,
                               uint64_t checksum) {
  VkPipelineCache cache, old = VK_NULL_HANDLE;
  uint8_t ok = 1;
  Pcachepb__ReportReason reason = 0;
  if (pcache__blob_load(device, bytes, size, checksum, &cache, &reason) == 0) {
    if (device->core.creating) {
      pthread_rwlock_wrlock(&device->core.cache_lock);
      old = device->core.cache;
      device->core.cache = cache;
      pthread_rwlock_unlock(&device->core.cache_lock);
      device->core.DestroyPipelineCache(device->core.vk_device, old, device->core.allocator);
    } else {
      pcache__blob_merge_loaded(device, &cache, 1, &ok);
    }
    if (!ok)
      reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
  }
  if (reason) {
    atomic_store(&device->snapshot.refused, 1);
    atomic_fetch_add(&device->core.stats.rejected_blobs, 1);
    /* Sent by the upload thread (reports.h): this may be a miss's thread. */
    if (device->core.client)
      pcache__refused_snapshot_queue(device, reason, checksum);
    return -EINVAL;
  }
  return 0;
}

int pcache__snapshot_covers(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE]) {
  uint64_t k0, k1;
  pcache__hash_keys(hash, &k0, &k1);
  if (pcache__table_find(&device->core.prefetched, k0, k1))
    return 0;
  pcache__table_insert(&device->core.prefetched, k0, k1, 1);
  pcache__snapshot_hold(device, hash, 0);
  return 1;
}

void pcache__snapshot_load(pcache_device *device, const pcache__reply *reply,
                           const Pcachepb__GetReply *got) {
  const Pcachepb__Blob *b = got->snapshot;
  const uint8_t *bytes;
  size_t size, n = 0;
  bytes = pcache__reply_bytes(reply, b->blob, b->blob_offset, b->blob_size, &size);
  if (pcache__snapshot_load_blob(device, bytes, size, b->checksum) < 0)
    return;
  for (size_t i = 0; i < got->n_snapshot_hashes; i++)
    if (got->snapshot_hashes[i].len == PCACHE_HASH_SIZE)
      n += (size_t)pcache__snapshot_covers(device, got->snapshot_hashes[i].data);
  /* Publishing takes the table's lock: any thread. */
  pcache__table_publish(&device->core.prefetched);
  atomic_fetch_add(&device->core.stats.prefetched, n);
  atomic_store(&device->core.stats.snapshot_loaded, n);
}

/* Room in a request frame for everything but the blob and the hashes. */
#define SNAPSHOT_FRAME_SLACK 4096u

int pcache__snapshot_upload(pcache_device *d) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__PutSnapshot ps = PCACHEPB__PUT_SNAPSHOT__INIT;
  Pcachepb__DeviceInfo info = PCACHEPB__DEVICE_INFO__INIT;
  ProtobufCBinaryData *hashes = NULL;
  pcache__hash *list = NULL;
  pcache__reply reply = {0};
  uint8_t *data = NULL;
  size_t n = 0, size = 0, u = 0;
  VkResult vr = VK_SUCCESS;
  int r = 0;

  pthread_mutex_lock(&d->snapshot.lock);
  r = d->snapshot.dirty && !d->core.no_snapshot;
  pthread_mutex_unlock(&d->snapshot.lock);
  if (!r)
    return 0; /* the daemon's snapshot already holds all of it */
  if (atomic_load(&d->core.client->connected) && d->core.client->max_snapshot == 0)
    return 0; /* a daemon without snapshots */
  /* The read side: no merge runs while the data is read, and every hash
   * listed was merged before it was listed. */
  pthread_rwlock_rdlock(&d->core.cache_lock);
  pthread_mutex_lock(&d->snapshot.lock);
  list = d->snapshot.held.n ? pcache__malloc(d->snapshot.held.n * sizeof *list) : NULL;
  if (list || !d->snapshot.held.n) {
    n = d->snapshot.held.n;
    if (n)
      memcpy(list, d->snapshot.held.items, n * sizeof *list);
    d->snapshot.dirty = 0;
  }
  pthread_mutex_unlock(&d->snapshot.lock);
  r = -ENOMEM;
  if (!list && n)
    goto out_unlock;
  /* Pipelines built meanwhile can grow the data between the two calls. */
  for (int tries = 0; tries < 4; tries++) {
    uint8_t *p;
    vr = d->core.GetPipelineCacheData(d->core.vk_device, d->core.cache, &size, NULL);
    if (vr != VK_SUCCESS || size == 0)
      break;
    p = pcache__realloc(data, size);
    if (!p)
      break;
    data = p;
    vr = d->core.GetPipelineCacheData(d->core.vk_device, d->core.cache, &size, data);
    if (vr != VK_INCOMPLETE)
      break;
  }
  r = vr == VK_SUCCESS && data ? 0 : -EIO;
out_unlock:
  pthread_rwlock_unlock(&d->core.cache_lock);
  if (r < 0)
    goto out_dirty;

  /* Unique hashes (a pipeline built again after a purge is listed twice). */
  if (n)
    qsort(list, n, sizeof *list, hash_cmp);
  for (size_t i = 0; i < n; i++)
    if (u == 0 || !pcache__hash_equal(&list[u - 1], &list[i]))
      list[u++] = list[i];
  r = 0;
  if ((d->core.client->max_snapshot && size > d->core.client->max_snapshot) ||
      (d->core.client->max_frame &&
       size + u * (PCACHE_HASH_SIZE + 2) + SNAPSHOT_FRAME_SLACK > d->core.client->max_frame))
    goto out; /* too big for this daemon: warm starts go blob by blob */
  hashes = pcache__calloc(u ? u : 1, sizeof *hashes);
  if (!hashes) {
    r = -ENOMEM;
    goto out_dirty;
  }
  for (size_t i = 0; i < u; i++) {
    hashes[i].data = list[i].bytes;
    hashes[i].len = PCACHE_HASH_SIZE;
  }
  pcache__device_info_message(&d->core, &info);
  ps.device = &info;
  ps.app = d->core.client->app_name;
  ps.blob.data = data;
  ps.blob.len = size;
  ps.state_hashes = hashes;
  ps.n_state_hashes = u;
  request.body_case = PCACHEPB__REQUEST__BODY_PUT_SNAPSHOT;
  request.put_snapshot = &ps;
  r = pcache__client_rpc(d->core.client, PCACHE__LANE_BACKGROUND, &request,
                         PCACHEPB__RESPONSE__BODY_PUT_SNAPSHOT,
                         pcache__client_background_timeout_ms(d->core.client), &reply);
  if (r == 0)
    atomic_fetch_add(&d->core.stats.snapshots_uploaded, 1);
  else if (reply.response && !pcache__reply_out_of_step(r, &reply))
    r = 0; /* refused (limits, an old daemon): trying again would not help */
  pcache__reply_release(&reply);
  if (r < 0)
    goto out_dirty;
  goto out;

out_dirty:
  pthread_mutex_lock(&d->snapshot.lock);
  d->snapshot.dirty = 1; /* the next flush or destroy tries again */
  pthread_mutex_unlock(&d->snapshot.lock);
out:
  pcache__free(hashes);
  pcache__free(data);
  pcache__free(list);
  return r;
}
