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
 * program would, go to the daemon for its replayer to build. */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "client/device.h"
#include "client/binary.h"
#include "client/blobs.h"
#include "client/build.h"
#include "client/prefetch.h"
#include "client/record.h"
#include "client/segment.h"
#include "client/snapshot.h"
#include "client/upload.h"
#include "common/alloc.h"
#include "common/clock.h"

/* VkPipelineCreateFlags2CreateInfoKHR is newer than the headers pcache
 * builds with: sType 1000470005, a 64-bit flags after sType and pNext. */
#define STYPE_PIPELINE_CREATE_FLAGS_2 ((VkStructureType)1000470005)
typedef struct flags2_info {
  VkStructureType sType;
  const void *pNext;
  uint64_t flags;
} flags2_info;

uint64_t pcache__pipeline_flags(const void *chain, VkPipelineCreateFlags flags,
                                int *ret_in_flags2) {
  *ret_in_flags2 = 0;
  for (const VkBaseInStructure *s = chain; s; s = s->pNext)
    if (s->sType == STYPE_PIPELINE_CREATE_FLAGS_2) {
      *ret_in_flags2 = 1;
      return ((const flags2_info *)s)->flags;
    }
  return flags;
}

static const VkPipelineCreationFeedbackCreateInfo *find_feedback(const void *chain) {
  for (const VkBaseInStructure *s = chain; s; s = s->pNext)
    if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO)
      return (const VkPipelineCreationFeedbackCreateInfo *)s;
  return NULL;
}

/* Creates the pipeline through cache. With creation feedback on (libpcache
 * apps that asked for the count of driver cache hits), a feedback struct
 * is chained onto a copy of the app's create info (never the app's own);
 * one the app chained itself is used as is. prepend, when not NULL, is one
 * struct of pcache's put in front of the app's chain in that copy (its
 * pNext is set here). */
static VkResult create_pipeline(pcache_device *d, const pcache__build *b, VkPipelineCache cache,
                                VkPipelineCreateFlags extra_flags, VkBaseOutStructure *prepend,
                                VkPipeline *ret_pipeline) {
  VkPipelineCreationFeedback feedback = {0};
  VkPipelineCreationFeedback stage_feedback[8];
  VkPipelineCreationFeedbackCreateInfo fb = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &feedback,
      .pPipelineStageCreationFeedbacks = stage_feedback};
  const void *app_chain = b->graphics ? b->graphics->pNext : b->compute->pNext;
  const VkPipelineCreationFeedbackCreateInfo *theirs = find_feedback(app_chain);
  const VkPipelineCreationFeedback *result = NULL;
  VkResult vr;
  if (b->graphics) {
    VkGraphicsPipelineCreateInfo ci = *b->graphics;
    ci.flags |= extra_flags;
    if (prepend) {
      prepend->pNext = (VkBaseOutStructure *)ci.pNext;
      ci.pNext = prepend;
    }
    if (d->core.creation_feedback && !theirs) {
      fb.pipelineStageCreationFeedbackCount = ci.stageCount <= 8 ? ci.stageCount : 0;
      fb.pNext = ci.pNext;
      ci.pNext = &fb;
      result = &feedback;
    }
    vr = d->core.CreateGraphicsPipelines(d->core.vk_device, cache, 1, &ci, b->allocator,
                                         ret_pipeline);
  } else {
    VkComputePipelineCreateInfo ci = *b->compute;
    ci.flags |= extra_flags;
    if (prepend) {
      prepend->pNext = (VkBaseOutStructure *)ci.pNext;
      ci.pNext = prepend;
    }
    if (d->core.creation_feedback && !theirs) {
      fb.pipelineStageCreationFeedbackCount = 1;
      fb.pNext = ci.pNext;
      ci.pNext = &fb;
      result = &feedback;
    }
    vr = d->core.CreateComputePipelines(d->core.vk_device, cache, 1, &ci, b->allocator,
                                        ret_pipeline);
  }
  if (theirs && d->core.creation_feedback)
    result = theirs->pPipelineCreationFeedback;
  if (vr == VK_SUCCESS && result && (result->flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
      (result->flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT))
    atomic_fetch_add(&d->core.stats.driver_cache_hits, 1);
  if (vr == VK_SUCCESS && *ret_pipeline == VK_NULL_HANDLE)
    vr = VK_ERROR_UNKNOWN;
  return vr;
}

/* Through the app cache when it received the entry (in_app_cache), else
 * the device cache. */
static VkResult create_cached(pcache_device *d, const pcache__build *b, int in_app_cache,
                              VkPipeline *ret_pipeline) {
  VkResult vr;
  if (in_app_cache) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = create_pipeline(d, b, b->app_cache, 0, NULL, ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
    return vr;
  }
  pthread_rwlock_rdlock(&d->core.cache_lock);
  vr = create_pipeline(d, b, d->core.cache, 0, NULL, ret_pipeline);
  pthread_rwlock_unlock(&d->core.cache_lock);
  return vr;
}

/* Gives the app cache one pipeline's entry. 1 when it has it. */
static int merge_into_app_cache(pcache_device *d, const pcache__build *b, VkPipelineCache src) {
  VkResult vr;
  if (b->app_cache == VK_NULL_HANDLE)
    return 0;
  pthread_rwlock_wrlock(b->app_cache_lock);
  vr = d->core.MergePipelineCaches(d->core.vk_device, b->app_cache, 1, &src);
  pthread_rwlock_unlock(b->app_cache_lock);
  if (vr == VK_SUCCESS && b->app_cache_got)
    *b->app_cache_got = 1;
  return vr == VK_SUCCESS;
}

/* One Get for state_hash. Returns 1 when the daemon's blob is now merged
 * into the device cache, and into the app cache if there is one
 * (*ret_in_app_cache). A blob that fails the checks is reported. first:
 * the device cache did not hold it before (it joins the snapshot). */
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
    *ret_in_app_cache = merge_into_app_cache(d, b, loaded);
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
      *ret_in_app_cache = merge_into_app_cache(d, b, loaded);
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
      VkResult vr = pcache__binary_create(&d->core, &container, handles);
      if (vr == VK_SUCCESS) {
        VkPipelineBinaryInfoKHR info = {.sType = VK_STRUCTURE_TYPE_PIPELINE_BINARY_INFO_KHR,
                                        .binaryCount = container.count,
                                        .pPipelineBinaries = handles};
        vr = create_pipeline(d, b, VK_NULL_HANDLE, 0, (VkBaseOutStructure *)&info, ret_pipeline);
      }
      /* A failed creation may have made some: destroying NULL is allowed. */
      pcache__binary_destroy(&d->core, handles, container.count);
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

static pcache__upload *upload_new(uint32_t kind, const pcache__desc_keys *keys, const uint8_t *desc,
                                  size_t desc_size, const void *blob, size_t blob_size,
                                  uint64_t compile_ns) {
  pcache__upload *u = pcache__calloc(1, sizeof *u);
  if (!u)
    return NULL;
  u->put.state_hash = keys->state_hash;
  u->put.kind = kind;
  u->put.compile_ns = compile_ns;
  u->put.blob = blob_size ? pcache__malloc(blob_size) : NULL;
  u->put.desc = pcache__malloc(desc_size);
  if ((blob_size && !u->put.blob) || !u->put.desc) {
    pcache__upload_free(u);
    return NULL;
  }
  if (blob_size)
    memcpy(u->put.blob, blob, blob_size);
  u->put.blob_size = blob_size;
  memcpy(u->put.desc, desc, desc_size);
  u->put.desc_size = desc_size;
  return u;
}

size_t pcache__build_modules(pcache_device *d, const pcache__build *b,
                             pcache__module *ret_modules[PCACHE_DESC_MAX_MODULES]) {
  size_t n_modules = 0;
  /* The code travels with the item: the app may destroy its modules before
   * the upload thread gets to it. A pipeline linked from libraries names
   * their modules too, but carries only its own stages' (if any): the
   * daemon has the others from the libraries' own uploads. */
  if (b->graphics) {
    uint32_t n = pcache__desc_graphics_parts(b->graphics) &
                         (VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT |
                          VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT)
                     ? b->graphics->stageCount
                     : 0;
    for (uint32_t i = 0; i < n && n_modules < PCACHE_DESC_MAX_MODULES; i++) {
      pcache__module *m = pcache__objmap_module(d->core.objects, b->graphics->pStages[i].module);
      if (m)
        ret_modules[n_modules++] = m;
    }
  } else {
    pcache__module *m = pcache__objmap_module(d->core.objects, b->compute->stage.module);
    if (m)
      ret_modules[n_modules++] = m;
  }
  return n_modules;
}

/* Queues a staged build of the pipeline: its description and the code it
 * names, no blob (build.h, "Staging"). Dropped when out of memory: the
 * pipeline is then only not shared. */
static void stage(pcache_device *d, const pcache__build *b, const pcache__desc_keys *keys,
                  const pcache__desc_buf *desc, uint64_t compile_ns) {
  uint64_t k0, k1;
  pcache__upload *u;
  /* Once a process: the layer's driver hits bypass the built table, and a
   * staged miss created again is not staged again; a full table (out of
   * memory) only stages it twice. */
  pcache__hash_keys(keys->state_hash.bytes, &k0, &k1);
  if (pcache__table_peek(&d->build.staged, k0, k1))
    return;
  (void)pcache__table_insert(&d->build.staged, k0, k1, 1);
  if (!(u = upload_new(b->kind, keys, desc->data, desc->size, NULL, 0, compile_ns)))
    return;
  u->put.stage = 1;
  u->n_modules = pcache__build_modules(d, b, u->modules);
  atomic_fetch_add(&d->core.stats.staged, 1);
  pcache__upload_enqueue(d, u);
}

/* Vendors whose drivers were measured paying for the fresh VkPipelineCache
 * a blob is captured from, so that compiling as the program would and
 * leaving the blob to the replayer is faster for the program: NVIDIA, +23%
 * of the compile (H200, driver 580, bench_binary "cold"; bench/RESULTS.md).
 * Another vendor joins this list when bench/probe-binary.sh measures the
 * same on its driver. */
static const uint32_t stage_compile_vendors[] = {0x10de};

void pcache__build_stage_policy(pcache_device *d, int store_had_nothing) {
  const char *env = getenv("PCACHE_STAGE");
  uint32_t vendor = pcache__devkey_vendor(&d->core.key);
  d->build.stage_hits = d->build.stage_compiles = 0;
  /* Binary mode's keys are binary keys, which the replayer does not build. */
  if (!d->core.client || d->core.binary || d->core.passthrough ||
      !atomic_load(&d->core.client->stages) || (env && strcmp(env, "off") == 0))
    return;
  if (env && strcmp(env, "all") == 0) {
    d->build.stage_hits = d->build.stage_compiles = 1;
    return;
  }
  /* A driver hit is described and staged only when asked: on the H200 the
   * light set's run after enabling pcache cost 1.44x (libpcache) and
   * 1.85x (the layer) the plain run with it, against 0.99-1.09 without
   * (bench/RESULTS.md): at 14 us a pipeline, describing and queueing is
   * not free. */
  d->build.stage_hits = env && strcmp(env, "learn") == 0 && store_had_nothing;
  for (size_t i = 0; i < sizeof stage_compile_vendors / sizeof *stage_compile_vendors; i++)
    if (vendor == stage_compile_vendors[i])
      d->build.stage_compiles = 1;
}

int pcache__build_stage_hit(pcache_device *d, const pcache__build *b, const pcache__desc_keys *keys,
                            const pcache__desc_buf *desc) {
  if (!d->build.stage_hits || pcache__prefetch_known(d, &keys->state_hash))
    return 0;
  stage(d, b, keys, desc, 0);
  return 1;
}

void pcache__build_keep(pcache_device *d, VkPipelineCache fresh, const pcache__build_kept *k) {
  size_t size = 0, taken = 0;
  void *data = NULL;
  if (d->core.GetPipelineCacheData(d->core.vk_device, fresh, &size, NULL) == VK_SUCCESS &&
      size > 0 && (data = pcache__malloc(size)) != NULL &&
      d->core.GetPipelineCacheData(d->core.vk_device, fresh, &size, data) == VK_SUCCESS) {
    VkResult merged;
    pthread_rwlock_wrlock(&d->core.cache_lock);
    merged = d->core.MergePipelineCaches(d->core.vk_device, d->core.cache, 1, &fresh);
    pthread_rwlock_unlock(&d->core.cache_lock);
    if (merged == VK_SUCCESS)
      pcache__snapshot_hold(d, k->keys->state_hash.bytes, 1);
    /* In binary mode the daemon's key is the binary key: VkPipelineCache
     * data (a chain with its own create flags 2) stays in this process. */
    if (d->core.client && !d->core.binary) {
      pcache__upload *u =
          upload_new(k->kind, k->keys, k->desc, k->desc_size, data, size, k->compile_ns);
      if (u) {
        memcpy(u->modules, k->modules, k->n_modules * sizeof *k->modules);
        u->n_modules = taken = k->n_modules;
        pcache__upload_enqueue(d, u);
      }
    }
  }
  for (size_t i = taken; i < k->n_modules; i++)
    pcache__module_unref(k->modules[i]);
  pcache__free(data);
}

/* Binary mode's miss nobody could serve: compiled as the program would
 * (its own cache, or none), with VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR
 * in a VkPipelineCreateFlags2CreateInfoKHR put in front of a copy of its
 * chain (carrying the create info's flags, which it replaces), then the
 * pipeline's binaries read back into a container and queued for upload.
 * Capturing costs about 1% of the compile on NVIDIA where a fresh cache of
 * pcache's own cost 23% (bench/RESULTS.md, bench_binary). */
static VkResult compile_binary(pcache_device *d, const pcache__build *b,
                               const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                               VkPipeline *ret_pipeline) {
  flags2_info f2 = {.sType = STYPE_PIPELINE_CREATE_FLAGS_2,
                    .flags = (uint64_t)(b->graphics ? b->graphics->flags : b->compute->flags) |
                             VK_PIPELINE_CREATE_2_CAPTURE_DATA_BIT_KHR};
  pcache__build_kept kept = {
      .kind = b->kind, .keys = keys, .desc = desc->data, .desc_size = desc->size};
  uint8_t *blob = NULL;
  size_t size = 0;
  uint64_t start = pcache__mono_ns();
  VkPipeline pipeline;
  VkResult vr;
  /* No pipeline cache, not even the app's: capturing through one is
   * invalid (VUID-vkCreateGraphicsPipelines-pNext-09617). The app's cache
   * then goes without this pipeline's entry; the driver's own disk cache
   * gets it as without pcache. */
  vr = create_pipeline(d, b, VK_NULL_HANDLE, 0, (VkBaseOutStructure *)&f2, &pipeline);
  kept.compile_ns = pcache__mono_ns() - start;
  if (vr != VK_SUCCESS)
    return vr;
  atomic_fetch_add(&d->core.stats.compiles, 1);
  *ret_pipeline = pipeline;
  if (pcache__binary_capture(&d->core, pipeline, b->allocator, &blob, &size) == 0 &&
      d->core.client) {
    pcache__upload *u =
        upload_new(kept.kind, keys, kept.desc, kept.desc_size, blob, size, kept.compile_ns);
    if (u) {
      u->n_modules = pcache__build_modules(d, b, u->modules);
      pcache__upload_enqueue(d, u);
    }
  }
  pcache__free(blob);
  return VK_SUCCESS;
}

/* What the built table says of a state hash this process built (and
 * build_first's *ret_held): the device cache holds it; the driver's own
 * caches served it; or it was compiled as the program would and staged. */
enum { BUILT_IN_CACHE = 1, BUILT_BY_DRIVER = 2, BUILT_STAGED = 3 };

/* The pipeline as the program would create it: its own cache, or none. */
static VkResult create_as_program(pcache_device *d, const pcache__build *b,
                                  VkPipeline *ret_pipeline) {
  VkResult vr;
  if (b->app_cache != VK_NULL_HANDLE) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = create_pipeline(d, b, b->app_cache, 0, NULL, ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
    if (vr == VK_SUCCESS && b->app_cache_got)
      *b->app_cache_got = 1;
  } else {
    vr = create_pipeline(d, b, VK_NULL_HANDLE, 0, NULL, ret_pipeline);
  }
  return vr;
}

/* A staged miss (build.h, "Staging"): compiled as the program would, which
 * is the plain program's cost, and its description staged for the
 * daemon's replayer to build the blob from. The device cache does not get
 * it (*ret_held BUILT_STAGED: created again, it goes to the driver the same
 * way). */
static VkResult compile_staged(pcache_device *d, const pcache__build *b,
                               const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                               VkPipeline *ret_pipeline) {
  uint64_t start = pcache__mono_ns();
  VkResult vr = create_as_program(d, b, ret_pipeline);
  if (vr != VK_SUCCESS)
    return vr;
  atomic_fetch_add(&d->core.stats.compiles, 1);
  stage(d, b, keys, desc, pcache__mono_ns() - start);
  return VK_SUCCESS;
}

/* A miss nobody could serve: compile with a fresh cache of its own, so its
 * data is this pipeline's alone (the daemon keys blobs per pipeline), then
 * merge that into the device cache (and the app cache) and queue the
 * upload. Staged instead where that fresh cache costs the program
 * (compile_staged). *ret_held: the device cache holds it now. */
static VkResult compile(pcache_device *d, const pcache__build *b, const pcache__desc_keys *keys,
                        const pcache__desc_buf *desc, VkPipeline *ret_pipeline, int *ret_held) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache fresh;
  VkPipeline pipeline;
  uint64_t start;
  VkResult vr;
  pcache__build_kept kept = {
      .kind = b->kind, .keys = keys, .desc = desc->data, .desc_size = desc->size};

  /* The program asked not to compile: its own cache (or the driver's disk
   * cache) may still have the pipeline, so it goes to the driver with the
   * program's cache, as without pcache; there is no blob to share. */
  int in_flags2;
  if (pcache__pipeline_flags(b->graphics ? b->graphics->pNext : b->compute->pNext,
                             b->graphics ? b->graphics->flags : b->compute->flags, &in_flags2) &
      VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT)
    return create_cached(d, b, b->app_cache != VK_NULL_HANDLE, ret_pipeline);
  /* A chain with flags 2 of its own cannot carry the capture bit without
   * changing the app's struct: the VkPipelineCache path then, kept here. */
  if (d->core.binary && !in_flags2)
    return compile_binary(d, b, keys, desc, ret_pipeline);
  /* The daemon may have lost its replayer since creation (a restart
   * without one): its Hello says so. */
  if (d->build.stage_compiles && atomic_load(&d->core.client->stages)) {
    *ret_held = BUILT_STAGED;
    return compile_staged(d, b, keys, desc, ret_pipeline);
  }
  if (d->core.CreatePipelineCache(d->core.vk_device, &ci, d->core.allocator, &fresh) != VK_SUCCESS)
    fresh = VK_NULL_HANDLE; /* still build it, just without a blob to share */
  start = pcache__mono_ns();
  vr = create_pipeline(d, b, fresh, 0, NULL, &pipeline);
  kept.compile_ns = pcache__mono_ns() - start;
  if (vr != VK_SUCCESS)
    goto out_cache;
  atomic_fetch_add(&d->core.stats.compiles, 1);
  *ret_pipeline = pipeline;
  if (fresh == VK_NULL_HANDLE)
    goto out_cache;
  (void)merge_into_app_cache(d, b, fresh);
  kept.n_modules = d->core.client ? pcache__build_modules(d, b, kept.modules) : 0;
  pcache__build_keep(d, fresh, &kept);
out_cache:
  if (fresh != VK_NULL_HANDLE)
    d->core.DestroyPipelineCache(d->core.vk_device, fresh, d->core.allocator);
  return vr;
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
  if (b->app_cache != VK_NULL_HANDLE) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = create_pipeline(d, b, b->app_cache,
                         VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, NULL,
                         ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
  } else {
    vr = create_pipeline(d, b, VK_NULL_HANDLE,
                         VK_PIPELINE_CREATE_FAIL_ON_PIPELINE_COMPILE_REQUIRED_BIT, NULL,
                         ret_pipeline);
  }
  if (vr != VK_SUCCESS)
    return 0;
  atomic_fetch_add(&d->core.stats.driver_hits, 1);
  return 1;
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
  return create_cached(d, b, in_app_cache, ret_pipeline);
}

int pcache__build_from_daemon(pcache_device *d, const pcache__build *b,
                              const pcache__desc_keys *keys, int *ret_in_app_cache) {
  *ret_in_app_cache = 0;
  if (!d->core.client)
    return 0;
  /* Without a prefetch, the first miss the snapshot covers loads it. */
  pcache__segment_snapshot_on_miss(d, &keys->state_hash);
  if (pcache__prefetch_known(d, &keys->state_hash)) {
    atomic_fetch_add(&d->core.stats.daemon_hits, 1);
    /* The daemon sent it unasked: tell it this one was used (once: the
     * built table sends later builds to create_held directly). */
    pcache__upload_used(d, &keys->state_hash);
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
   * (H200, bench/RESULTS.md); a probe that misses costs 2.4 us. */
  if (!b->driver_asked && pcache__build_driver_first(d, b, ret_pipeline) == 1) {
    *ret_source = PCACHE__BUILT_DRIVER;
    *ret_held = BUILT_BY_DRIVER;
    /* The daemon sent it: it is in use, whoever served it (its entry's
     * place in the LRU). */
    if (d->core.client && pcache__prefetch_known(d, &keys->state_hash))
      pcache__upload_used(d, &keys->state_hash);
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
    return compile(d, b, keys, desc, ret_pipeline, ret_held);
  }
  switch (pcache__build_from_daemon(d, b, keys, &in_app_cache)) {
  case PCACHE__DAEMON_PREFETCHED:
    *ret_source = PCACHE__BUILT_DAEMON;
    return create_held(d, b, keys, ret_pipeline);
  case PCACHE__DAEMON_FETCHED:
    *ret_source = PCACHE__BUILT_DAEMON;
    return create_cached(d, b, in_app_cache, ret_pipeline);
  default:
    *ret_source = PCACHE__BUILT_COMPILED;
    return compile(d, b, keys, desc, ret_pipeline, ret_held);
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
  switch (pcache__table_acquire(&d->build.built, k0, k1, &v, &claim)) {
  case PCACHE__TABLE_FOUND:
    *ret_source = PCACHE__BUILT_LOCAL;
    /* BUILT_BY_DRIVER: the driver's caches served it, the device cache
     * does not hold it: the driver is asked again (and compiles only if it
     * has since lost it). */
    if (v == BUILT_STAGED) {
      /* Not in the device cache, and staged already: as the program would
       * create it again, without pcache. */
      vr = create_as_program(d, b, ret_pipeline);
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
  return create_cached(d, b, b->app_cache != VK_NULL_HANDLE, ret_pipeline);
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
