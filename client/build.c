/* Building one pipeline: see build.h. The order of sources, for a state
 * hash this process has not built yet: the prefetched set (the blob is
 * already in the device cache; without a prefetch, the mapped segment's
 * snapshot joins it at the first miss it covers), the driver's own caches
 * (driver first), the mapped segment's blob, one Get, then the driver
 * with a fresh cache of the pipeline's own, whose data is uploaded. In
 * binary mode (binary.h): driver first, one Get of a binary container
 * the pipeline is created from, then a compile that captures the
 * pipeline's binaries for the upload. Staging (build.h) changes what goes
 * up, not the order: a driver hit's description, and a miss compiled as the
 * program would, go to the daemon for its replayer to build.
 *
 * This file holds the order (daemon paths, driver first, the device
 * cache); creating the pipeline and the compile paths (staging, binary
 * capture, the fresh cache kept) are build_compile.c's
 * (build_internal.h). */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "client/device.h"
#include "client/binary.h"
#include "client/blobs.h"
#include "client/build.h"
#include "client/phase.h"
#include "client/build_internal.h"
#include "client/prefetch.h"
#include "client/record.h"
#include "client/segment.h"
#include "client/snapshot.h"
#include "client/reports.h"
#include "client/upload.h"
#include "common/alloc.h"
#include "common/clock.h"

/* One Get of n state hashes into *reply (released by the caller in every
 * case: a refusal keeps its Response, proto/rpc.h). 0 or an error. */
static int get_blobs(pcache_device *d, ProtobufCBinaryData *hashes, size_t n,
                     pcache__reply *reply) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  get.device_key.data = (uint8_t *)pcache__device_wire_key(&d->core)->bytes;
  get.device_key.len = PCACHE_DEVKEY_SIZE;
  get.state_hashes = hashes;
  get.n_state_hashes = n;
  request.body_case = PCACHEPB__REQUEST__BODY_GET;
  request.get = &get;
  if (!d->core.client)
    return -ENOTCONN;
  return pcache__client_rpc(d->core.client, PCACHE__LANE_APP, &request,
                            PCACHEPB__RESPONSE__BODY_GET, d->core.client->timeout_ms, reply);
}

/* Tells the daemon one blob was refused, and counts it. */
static void report_refused(pcache_device *d, ProtobufCBinaryData hash,
                           Pcachepb__ReportReason reason) {
  Pcachepb__ReportItem item = PCACHEPB__REPORT_ITEM__INIT;
  const Pcachepb__ReportItem *items[1] = {&item};
  atomic_fetch_add(&d->core.stats.rejected_blobs, 1);
  item.state_hash = hash;
  item.reason = reason;
  pcache__blob_report(d, items, 1);
}

/* One Get for state_hash. Returns 1 when the daemon's blob is now merged
 * into the device cache, and into the app cache if there is one
 * (*ret_in_app_cache). A blob that fails the checks is reported. first:
 * the device cache did not hold it before (it joins the snapshot). */
static int fetch_from_daemon(pcache_device *d, const pcache__build *b,
                             const pcache__hash *state_hash, int first, int *ret_in_app_cache) {
  ProtobufCBinaryData hash = {.len = PCACHE_HASH_SIZE, .data = (uint8_t *)state_hash->bytes};
  pcache__reply reply = {0};
  VkPipelineCache loaded;
  int merged = 0;
  /* Binary mode stores no VkPipelineCache data: nothing to merge. */
  if (d->core.binary)
    return 0;
  /* The mapped segment first: no round trip, no copy. */
  if (pcache__segment_find(d, state_hash, &loaded)) {
    uint8_t ok = 0;
    *ret_in_app_cache = pcache__build_merge_app_cache(d, b, loaded);
    pcache__blob_merge_loaded(d, &loaded, 1, &ok);
    /* A miss that lost the race to load the snapshot took its own blob:
     * the snapshot has it, so it is no reason to upload a new one. */
    if (ok && first)
      pcache__snapshot_hold(d, state_hash->bytes, !pcache__segment_snapshot_holds(d, state_hash));
    if (ok)
      return 1;
    pcache__segment_refuse(d, state_hash);
    report_refused(d, hash, PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED);
  }
  if (get_blobs(d, &hash, 1, &reply) != 0)
    goto out;
  const Pcachepb__GetReply *got = reply.response->get;
  for (size_t i = 0; i < got->n_blobs && !merged; i++) {
    const Pcachepb__Blob *blob = got->blobs[i];
    const uint8_t *bytes;
    size_t size;
    uint8_t ok = 0;
    Pcachepb__ReportReason reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
    if (blob->state_hash.len != PCACHE_HASH_SIZE ||
        memcmp(blob->state_hash.data, state_hash->bytes, PCACHE_HASH_SIZE) != 0)
      continue;
    bytes = pcache__reply_bytes(&reply, blob->blob, blob->blob_offset, blob->blob_size, &size);
    if (pcache__blob_load(d, bytes, size, blob->checksum, &loaded, &reason) == 0) {
      /* The app cache first: merge_loaded destroys the loaded cache. */
      *ret_in_app_cache = pcache__build_merge_app_cache(d, b, loaded);
      pcache__blob_merge_loaded(d, &loaded, 1, &ok);
    }
    if (ok) {
      merged = 1;
      if (first)
        pcache__snapshot_hold(d, state_hash->bytes, 1);
      break;
    }
    report_refused(d, hash, reason);
  }
out:
  pcache__reply_release(&reply);
  return merged;
}

/* Binary mode's daemon hit: one Get; a container that passes every check
 * (its checksum, then common/binblob.c against the binary key) becomes
 * binaries, and the pipeline is created from them, with no pipeline cache.
 * One that fails, or that the driver refuses, is reported as a refused
 * VkPipelineCache blob is. 1 with the pipeline, else 0. */
static int binary_from_daemon(pcache_device *d, const pcache__build *b,
                              const pcache__hash *state_hash, VkPipeline *ret_pipeline) {
  ProtobufCBinaryData hash = {.len = PCACHE_HASH_SIZE, .data = (uint8_t *)state_hash->bytes};
  pcache__reply reply = {0};
  int built = 0;
  if (get_blobs(d, &hash, 1, &reply) != 0)
    goto out;
  const Pcachepb__GetReply *got = reply.response->get;
  for (size_t i = 0; i < got->n_blobs && !built; i++) {
    const Pcachepb__Blob *blob = got->blobs[i];
    Pcachepb__ReportReason reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
    VkPipelineBinaryKHR handles[PCACHE_BINBLOB_MAX_BINARIES] = {0};
    pcache__binblob container;
    const uint8_t *bytes;
    size_t size;
    if (blob->state_hash.len != PCACHE_HASH_SIZE ||
        memcmp(blob->state_hash.data, state_hash->bytes, PCACHE_HASH_SIZE) != 0)
      continue;
    bytes = pcache__reply_bytes(&reply, blob->blob, blob->blob_offset, blob->blob_size, &size);
    if (!bytes || pcache__checksum64(bytes, size) != blob->checksum) {
      reason = PCACHEPB__REPORT_REASON__REPORT_REASON_CHECKSUM;
    } else if (pcache__binblob_parse(bytes, size, &d->core.bin_key, &container) != 0) {
      reason = PCACHEPB__REPORT_REASON__REPORT_REASON_HEADER;
    } else {
      VkResult vr = pcache__binary_create(&d->core.bin_vk, &container, handles);
      if (vr == VK_SUCCESS) {
        VkPipelineBinaryInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR,
                                        .binaryCount = container.count,
                                        .pPipelineBinaries = handles};
        vr = pcache__build_create(d, b, VK_NULL_HANDLE, 0, (VkBaseOutStructure *)&info,
                                  ret_pipeline);
      }
      /* A failed creation may have made some: destroying NULL is allowed. */
      pcache__binary_destroy(&d->core.bin_vk, handles, container.count);
      if (vr == VK_SUCCESS) {
        built = 1;
        break;
      }
    }
    report_refused(d, hash, reason);
  }
out:
  pcache__reply_release(&reply);
  return built;
}

/* Hashes per Get when filling an app cache: a few MB of NVIDIA blobs. */
#define FILL_BATCH 64

size_t pcache__build_fill_app_cache(pcache_device *d, VkPipelineCache app_cache,
                                    pthread_rwlock_t *lock, const pcache__hash *hashes, size_t n,
                                    uint8_t *ret_got) {
  ProtobufCBinaryData batch[FILL_BATCH];
  size_t received = 0;
  memset(ret_got, 0, n);
  /* Binary mode: the app cache receives what is compiled through it, and
   * no VkPipelineCache data is stored to fill it with. */
  if (d->core.binary)
    return 0;
  for (size_t start = 0; start < n && d->core.client; start += FILL_BATCH) {
    size_t count = n - start < FILL_BATCH ? n - start : FILL_BATCH;
    pcache__reply reply = {0};
    for (size_t i = 0; i < count; i++)
      batch[i] = (ProtobufCBinaryData){.len = PCACHE_HASH_SIZE,
                                       .data = (uint8_t *)hashes[start + i].bytes};
    if (get_blobs(d, batch, count, &reply) != 0) {
      pcache__reply_release(&reply);
      break; /* the daemon is away or slow: the rest go without, as they would */
    }
    const Pcachepb__GetReply *got = reply.response->get;
    for (size_t k = 0; k < got->n_blobs; k++) {
      const Pcachepb__Blob *blob = got->blobs[k];
      Pcachepb__ReportReason reason = PCACHEPB__REPORT_REASON__REPORT_REASON_REJECTED;
      VkPipelineCache loaded;
      const uint8_t *bytes;
      size_t size, i;
      VkResult vr;
      /* Only a blob for a hash asked for, and not one already taken. */
      for (i = 0; i < count; i++)
        if (blob->state_hash.len == PCACHE_HASH_SIZE && !ret_got[start + i] &&
            memcmp(blob->state_hash.data, hashes[start + i].bytes, PCACHE_HASH_SIZE) == 0)
          break;
      if (i == count)
        continue;
      bytes = pcache__reply_bytes(&reply, blob->blob, blob->blob_offset, blob->blob_size, &size);
      if (pcache__blob_load(d, bytes, size, blob->checksum, &loaded, &reason) != 0) {
        report_refused(d, batch[i], reason);
        continue;
      }
      pthread_rwlock_wrlock(lock);
      vr = d->core.MergePipelineCaches(d->core.vk_device, app_cache, 1, &loaded);
      pthread_rwlock_unlock(lock);
      d->core.DestroyPipelineCache(d->core.vk_device, loaded, d->core.allocator);
      if (vr == VK_SUCCESS) {
        ret_got[start + i] = 1;
        received++;
      }
    }
    pcache__reply_release(&reply);
  }
  return received;
}

/* Driver first (build.h). An error that was not about the cache is not
 * returned here: the usual path meets it again. A chain that carries
 * VkPipelineCreateFlags2CreateInfoKHR is not asked: its flags replace the
 * ones this would set, and the app's chain is not ours to copy. */
int pcache__build_driver_first(pcache_device *d, const pcache__build *b,
                               VkPipeline *ret_pipeline) {
  int in_flags2;
  VkResult vr;
  if (!d->core.driver_first)
    return -1;
  (void)pcache__pipeline_flags(b->graphics ? b->graphics->pNext : b->compute->pNext, 0, &in_flags2);
  if (in_flags2)
    return -1;
  PCACHE_PHASE_BEGIN(DRIVER);
  if (b->app_cache != VK_NULL_HANDLE) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = pcache__build_create(d, b, b->app_cache,
                              VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, NULL,
                              ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
  } else {
    vr = pcache__build_create(d, b, VK_NULL_HANDLE,
                              VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, NULL,
                              ret_pipeline);
  }
  PCACHE_PHASE_END(DRIVER);
  if (vr != VK_SUCCESS) {
    atomic_fetch_add(&d->build.probe_misses, 1);
    return 0;
  }
  atomic_fetch_add(&d->core.stats.driver_hits, 1);
  return 1;
}

int pcache__build_probe_first(pcache_device *d, pcache__build *b, VkPipeline *ret_pipeline) {
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  int asked;
  if (b->graphics && (b->graphics->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR))
    return 0;
  asked = pcache__build_driver_first(d, b, ret_pipeline);
  if (asked == 1) {
    /* Described only in the app's first run under pcache (stage_hits), so
     * that the store learns what the driver served; other runs keep the
     * hit at the driver's own cost. */
    if (d->build.stage_hits) {
      pcache__desc_buf_init(&buf);
      if (pcache__build_describe(d, b, &buf, &keys) == 0)
        (void)pcache__build_stage_hit(d, b, &keys, &buf);
      pcache__desc_buf_release(&buf);
    }
    return 1;
  }
  b->driver_asked = asked == 0;
  return 0;
}

/* The device cache holds the pipeline (prefetched, or built earlier here):
 * an app cache still needs this pipeline's own entry, which only the
 * daemon has as a blob of its own: fetched now, or handed to the caller
 * to fetch before the app reads its cache (app_cache_defer). Without it
 * (daemon gone, upload not yet done) the pipeline comes from the device
 * cache and the app cache goes without, as it would have had the pipeline
 * not been built here at all. */
static VkResult create_held(pcache_device *d, const pcache__build *b, const pcache__desc_keys *keys,
                            VkPipeline *ret_pipeline) {
  int in_app_cache = b->app_cache != VK_NULL_HANDLE && b->app_cache_has;
  if (b->app_cache != VK_NULL_HANDLE && !in_app_cache) {
    if (b->app_cache_defer)
      b->app_cache_defer(b->app_cache_defer_ctx, &keys->state_hash);
    else
      (void)fetch_from_daemon(d, b, &keys->state_hash, 0, &in_app_cache);
  }
  return pcache__build_create_cached(d, b, in_app_cache, ret_pipeline);
}

int pcache__build_from_daemon(pcache_device *d, const pcache__build *b,
                              const pcache__desc_keys *keys, int *ret_in_app_cache) {
  *ret_in_app_cache = 0;
  if (!d->core.client)
    return 0;
  /* The driver's caches do not hold everything: a prefetch left for the
   * first miss (pcache__prefetch_in_background) starts now. Every miss
   * that wants the daemon's blob comes here, whether the driver-first
   * probe missed it, skipped its chain, or is off. */
  pcache__upload_prefetch_on_miss(d);
  /* Without a prefetch, the first miss the snapshot covers loads it. */
  pcache__segment_snapshot_on_miss(d, &keys->state_hash);
  if (pcache__prefetch_known(d, &keys->state_hash)) {
    atomic_fetch_add(&d->core.stats.daemon_hits, 1);
    /* The daemon sent it unasked: tell it this one was used (once: the
     * built table sends later builds to create_held directly). */
    pcache__used_queue(d, &keys->state_hash);
    return PCACHE__DAEMON_PREFETCHED;
  }
  if (fetch_from_daemon(d, b, &keys->state_hash, 1, ret_in_app_cache)) {
    atomic_fetch_add(&d->core.stats.daemon_hits, 1);
    return PCACHE__DAEMON_FETCHED;
  }
  return 0;
}

static VkResult build_first(pcache_device *d, const pcache__build *b, const pcache__desc_keys *keys,
                            const pcache__desc_buf *desc, VkPipeline *ret_pipeline,
                            pcache__build_source *ret_source, int *ret_held) {
  int in_app_cache;
  *ret_held = BUILT_IN_CACHE;
  atomic_fetch_add(&d->core.stats.misses, 1);
  /* Prefetched or not, the driver first: on NVIDIA a pipeline created
   * from the device cache, where the prefetch merged its blob, cost 0.058
   * ms on the light set against 0.014 for the driver's disk-cache hit
   * (H200, bench/RESULTS.md); a probe that misses costs 2.4 us there. But
   * a driver whose caches never answer (lavapipe: its probe cost warm
   * starts a fifth) is not asked for what the prefetch brought once its
   * probe has only missed. */
  int known = d->core.client && pcache__segment_known(d, &keys->state_hash);
  int ask = !b->driver_asked;
  if (ask && known)
    ask = atomic_load(&d->core.stats.driver_hits) > 0 ||
          atomic_load(&d->build.probe_misses) < PCACHE__PROBE_MISSES;
  if (ask && pcache__build_driver_first(d, b, ret_pipeline) == 1) {
    *ret_source = PCACHE__BUILT_DRIVER;
    *ret_held = BUILT_BY_DRIVER;
    /* The daemon sent it: it is in use, whoever served it (its entry's
     * place in the LRU). */
    if (known)
      pcache__used_queue(d, &keys->state_hash);
    else
      (void)pcache__build_stage_hit(d, b, keys, desc);
    return VK_SUCCESS;
  }
  if (d->core.binary) {
    if (d->core.client && binary_from_daemon(d, b, &keys->state_hash, ret_pipeline)) {
      atomic_fetch_add(&d->core.stats.daemon_hits, 1);
      *ret_source = PCACHE__BUILT_DAEMON;
      return VK_SUCCESS;
    }
    *ret_source = PCACHE__BUILT_COMPILED;
    return pcache__build_compile(d, b, keys, desc, ret_pipeline, ret_held);
  }
  switch (pcache__build_from_daemon(d, b, keys, &in_app_cache)) {
  case PCACHE__DAEMON_PREFETCHED:
    *ret_source = PCACHE__BUILT_DAEMON;
    return create_held(d, b, keys, ret_pipeline);
  case PCACHE__DAEMON_FETCHED:
    *ret_source = PCACHE__BUILT_DAEMON;
    return pcache__build_create_cached(d, b, in_app_cache, ret_pipeline);
  default:
    *ret_source = PCACHE__BUILT_COMPILED;
    return pcache__build_compile(d, b, keys, desc, ret_pipeline, ret_held);
  }
}


VkResult pcache__build_hashed(pcache_device *d, const pcache__build *b,
                              const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                              VkPipeline *ret_pipeline, pcache__build_source *ret_source) {
  pcache_pending *claim;
  uint64_t k0, k1, v;
  int held;
  VkResult vr;
  pcache__hash_keys(keys->state_hash.bytes, &k0, &k1);
  if (b->claimed && !pcache__table_get(&d->build.built, k0, k1)) {
    vr = build_first(d, b, keys, desc, ret_pipeline, ret_source, &held);
    if (vr == VK_SUCCESS && held != BUILT_BY_DRIVER)
      (void)pcache__table_insert(&d->build.built, k0, k1, (uint64_t)held);
    goto out;
  }
  switch (pcache__table_acquire(&d->build.built, k0, k1, &v, &claim)) {
  case PCACHE__TABLE_FOUND:
    *ret_source = PCACHE__BUILT_LOCAL;
    /* BUILT_BY_DRIVER: the driver's caches served it, the device cache
     * does not hold it: the driver is asked again (and compiles only if it
     * has since lost it). */
    if (v == BUILT_STAGED) {
      /* Not in the device cache, and staged already: as the program would
       * create it again, without pcache. */
      vr = pcache__build_as_program(d, b, ret_pipeline);
    } else if (v != BUILT_BY_DRIVER && !d->core.binary) {
      vr = create_held(d, b, keys, ret_pipeline);
    } else if (pcache__build_driver_first(d, b, ret_pipeline) == 1) {
      vr = VK_SUCCESS;
    } else {
      /* The driver has lost it since (or was not asked: driver first off
       * in binary mode), and the device cache never held it: the whole
       * path again, the daemon's blob or a compile that is uploaded, and
       * counted as what it was. */
      pcache__build again = *b;
      again.driver_asked = 1;
      vr = build_first(d, &again, keys, desc, ret_pipeline, ret_source, &held);
    }
    break;
  case PCACHE__TABLE_CLAIMED:
    vr = build_first(d, b, keys, desc, ret_pipeline, ret_source, &held);
    /* A failure is not remembered: the next caller tries again. */
    pcache__table_complete(&d->build.built, claim, vr != VK_SUCCESS ? 0 : (uint64_t)held, (int)vr);
    break;
  case PCACHE__TABLE_FAILED:
    /* The build we waited for failed (maybe only for its caller: a
     * compile-required answer, an allocator that ran out): our own try. */
    vr = build_first(d, b, keys, desc, ret_pipeline, ret_source, &held);
    break;
  default:
    /* The claim table is out of memory: build without a claim (a racing
     * thread may build the same pipeline too) rather than fail the call. */
    vr = build_first(d, b, keys, desc, ret_pipeline, ret_source, &held);
    break;
  }
out:
  /* A library, wherever it came from, is recorded by its description, so
   * that pipelines linking it can be described. */
  if (vr == VK_SUCCESS && b->graphics && (b->graphics->flags & VK_PIPELINE_CREATE_LIBRARY_BIT_KHR))
    pcache__record_pipeline_library(&d->core, desc, keys, *ret_pipeline);
  return vr;
}

VkResult pcache__build_unhashable(pcache_device *d, const pcache__build *b,
                                  VkPipeline *ret_pipeline) {
  atomic_fetch_add(&d->core.stats.misses, 1);
  atomic_fetch_add(&d->core.stats.unhashable, 1);
  /* The app cache's read side even here: another thread may be merging an
   * entry into it, which the app cannot know to synchronize with. */
  return pcache__build_create_cached(d, b, b->app_cache != VK_NULL_HANDLE, ret_pipeline);
}

int pcache__build_describe(pcache_device *d, const pcache__build *b, pcache__desc_buf *buf,
                           pcache__desc_keys *ret_keys) {
  void *token = pcache__objmap_read_begin(d->core.objects);
  int r = b->graphics ? pcache__desc_graphics(b->graphics, &d->core.lookup, buf, ret_keys)
                      : pcache__desc_compute(b->compute, &d->core.lookup, buf, ret_keys);
  pcache__objmap_read_end(token);
  /* The one place libpcache and the layer both learn why: said here, once
   * for both (the layer also counts it in its report). */
  if (r == PCACHE_EUNHASHABLE)
    pcache__log_unhashable(d->core.log, buf);
  return r;
}
