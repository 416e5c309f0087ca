/* Prefetch: the blobs pcached holds for (device, app), asked for page by
 * page, checked, merged into the device cache with one merge per page, and
 * remembered in the prefetched set so a miss on one of them never asks the
 * daemon again. Device creation fetches what its time budget allows; the
 * upload thread fetches the rest. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/device.h"
#include "client/blobs.h"
#include "client/prefetch.h"
#include "client/snapshot.h"
#include "common/alloc.h"
#include "common/clock.h"

int pcache__prefetch_known(const pcache_device *device, const pcache__hash *hash) {
  uint64_t k0, k1;
  pcache__hash_keys(hash->bytes, &k0, &k1);
  return pcache__table_find(&device->core.prefetched, k0, k1) != 0;
}

int pcache__prefetch_disabled(const pcache_device_info *info) {
  const char *env = getenv("PCACHE_NO_PREFETCH");
  return info->no_prefetch || (env && env[0] == '1');
}

/* Vendors whose driver-first probe was measured answering a warm start
 * from the driver's own disk cache at its floor, so that the prefetch's
 * loading is off the program's path: NVIDIA (H200, driver 580: 2.4-3.8 ms
 * of pcache_device_create for a snapshot of 205 pipelines, 9-12 ms for
 * 205 blobs without one; bench/RESULTS.md). */
static const uint32_t background_vendors[] = {0x10de};

int pcache__prefetch_in_background(const pcache_device *d) {
  const char *env = getenv("PCACHE_PREFETCH"), *stage = getenv("PCACHE_STAGE");
  uint32_t vendor = pcache__devkey_vendor(&d->core.key);
  if (env && strcmp(env, "now") == 0)
    return 0;
  if (env && strcmp(env, "background") == 0)
    return 1;
  if (!d->core.driver_first || (stage && strcmp(stage, "learn") == 0))
    return 0;
  for (size_t i = 0; i < sizeof background_vendors / sizeof *background_vendors; i++)
    if (vendor == background_vendors[i])
      return 1;
  return 0;
}

/* What one page's blobs became. */
typedef struct page_work {
  VkPipelineCache *caches;
  size_t *blob_of; /* caches[i] came from blobs[blob_of[i]] */
  uint8_t *ok;
  Pcachepb__ReportItem *items;
  Pcachepb__ReportItem **item_ptrs;
  size_t n_caches, n_items;
} page_work;

static void page_report(page_work *w, const uint8_t *hash, Pcachepb__ReportReason reason) {
  pcachepb__report_item__init(&w->items[w->n_items]);
  w->items[w->n_items].state_hash = (ProtobufCBinaryData){PCACHE_HASH_SIZE, (uint8_t *)hash};
  w->items[w->n_items].reason = reason;
  w->item_ptrs[w->n_items] = &w->items[w->n_items];
  w->n_items++;
}

int pcache__prefetch_merge(pcache_device *device, const pcache__prefetch_blob *blobs, size_t n,
                           size_t *ret_known) {
  page_work w = {0};
  size_t n_known = 0;
  int r = -ENOMEM;
  w.caches = pcache__calloc(n ? n : 1, sizeof *w.caches);
  w.blob_of = pcache__calloc(n ? n : 1, sizeof *w.blob_of);
  w.ok = pcache__calloc(n ? n : 1, sizeof *w.ok);
  w.items = pcache__calloc(n ? n : 1, sizeof *w.items);
  w.item_ptrs = pcache__calloc(n ? n : 1, sizeof *w.item_ptrs);
  if (!w.caches || !w.blob_of || !w.ok || !w.items || !w.item_ptrs)
    goto out;
  r = 0;
  for (size_t i = 0; i < n; i++) {
    const pcache__prefetch_blob *b = &blobs[i];
    Pcachepb__ReportReason reason = 0;
    uint64_t k0, k1;
    /* Already merged (pages are sets of hashes; the order can shift
     * between them). */
    pcache__hash_keys(b->hash, &k0, &k1);
    if (pcache__table_find(&device->core.prefetched, k0, k1)) {
      n_known++;
      continue;
    }
    if (pcache__blob_load(device, b->bytes, b->size, b->checksum, &w.caches[w.n_caches], &reason) <
        0) {
      page_report(&w, b->hash, reason);
      continue;
    }
    w.blob_of[w.n_caches++] = i;
  }
  pcache__blob_merge_loaded(device, w.caches, w.n_caches, w.ok);
  for (size_t c = 0; c < w.n_caches; c++) {
    const pcache__prefetch_blob *b = &blobs[w.blob_of[c]];
    uint64_t k0, k1;
    if (!w.ok[c]) {
      page_report(&w, b->hash, PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED);
      continue;
    }
    pcache__hash_keys(b->hash, &k0, &k1);
    /* Out of memory: a miss on it then asks the daemon again. */
    pcache__table_insert(&device->core.prefetched, k0, k1, 1);
    atomic_fetch_add(&device->core.stats.prefetched, 1);
    /* Not in the daemon's snapshot (or there is none): a new one is due. */
    pcache__snapshot_hold(device, b->hash, 1);
  }
  /* Publishing takes the table's lock: any thread. */
  pcache__table_publish(&device->core.prefetched);
  atomic_fetch_add(&device->core.stats.rejected_blobs, w.n_items);
  pcache__blob_report(device, (const Pcachepb__ReportItem *const *)w.item_ptrs, w.n_items);
out:
  if (ret_known)
    *ret_known = n_known;
  pcache__free(w.item_ptrs);
  pcache__free(w.items);
  pcache__free(w.ok);
  pcache__free(w.blob_of);
  pcache__free(w.caches);
  return r;
}

int pcache__prefetch_page(pcache_device *device, pcache__lane_id lane, uint32_t offset,
                          uint32_t timeout_ms, uint32_t *ret_next, int *ret_more,
                          uint64_t *ret_call_ns) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Prefetch pre = PCACHEPB__PREFETCH__INIT;
  pcache__reply reply = {0};
  pcache__prefetch_blob *blobs = NULL;
  const Pcachepb__GetReply *got;
  uint64_t start = pcache__mono_ns();
  size_t n, n_blobs = 0, n_known = 0;
  int r;

  pre.device_key.data = device->core.key.bytes;
  pre.device_key.len = PCACHE_DEVKEY_SIZE;
  pre.app = device->core.client->app_name;
  pre.offset = offset;
  pre.snapshot = !device->core.no_snapshot && !atomic_load(&device->snapshot.refused);
  request.body_case = PCACHEPB__REQUEST__BODY_PREFETCH;
  request.prefetch = &pre;
  r = pcache__client_rpc(device->core.client, lane, &request, PCACHEPB__RESPONSE__BODY_PREFETCH,
                         timeout_ms, &reply);
  if (ret_call_ns)
    *ret_call_ns = pcache__mono_ns() - start;
  if (r != 0)
    goto out;
  got = reply.response->prefetch;
  if (offset == 0 && got->snapshot && atomic_load(&device->core.stats.snapshot_loaded) == 0)
    pcache__snapshot_load(device, &reply, got);
  n = got->n_blobs;
  *ret_next = offset + (uint32_t)n + got->dropped;
  *ret_more = got->more && n + got->dropped > 0; /* an empty page cannot go on */
  if (n == 0)
    goto out;
  blobs = pcache__calloc(n, sizeof *blobs);
  if (!blobs) {
    r = -ENOMEM;
    goto out;
  }
  for (size_t i = 0; i < n; i++) {
    const Pcachepb__Blob *b = got->blobs[i];
    pcache__prefetch_blob *pb = &blobs[n_blobs];
    size_t size;
    if (b->state_hash.len != PCACHE_HASH_SIZE)
      continue;
    pb->hash = b->state_hash.data;
    pb->bytes = pcache__reply_bytes(&reply, b->blob, b->blob_offset, b->blob_size, &size);
    pb->size = size;
    pb->checksum = b->checksum;
    n_blobs++;
  }
  /* The report points into the reply: merge sends it before release. */
  r = pcache__prefetch_merge(device, blobs, n_blobs, &n_known);
  /* A page with nothing new means a daemon that does not move on with the
   * offset: stop rather than ask for the same page forever. */
  if (n_known == n && got->dropped == 0)
    *ret_more = 0;
out:
  pcache__free(blobs);
  pcache__reply_release(&reply);
  return r;
}

int pcache__prefetch_at_create(pcache_device *device, const pcache_device_info *info,
                               uint32_t start_offset, uint32_t *ret_offset) {
  uint64_t budget_ns = (uint64_t)device->core.client->timeout_ms * 1000000u;
  uint32_t offset = start_offset;
  if (pcache__prefetch_disabled(info))
    return 0;
  for (;;) {
    uint64_t call_ns = 0;
    uint32_t next = offset;
    int more = 0, r;
    if (budget_ns < 1000000u)
      break;
    r = pcache__prefetch_page(device, PCACHE__LANE_APP, offset, (uint32_t)(budget_ns / 1000000u),
                              &next, &more, &call_ns);
    if (r == -ETIMEDOUT)
      break; /* the daemon is slow, not absent: try again in the background */
    if (r < 0 || !more)
      return 0;
    offset = next;
    budget_ns = call_ns < budget_ns ? budget_ns - call_ns : 0;
  }
  *ret_offset = offset;
  return 1;
}
