/* Getting a pipeline: the tiers (no lock on a hit), then the daemon (one
 * Get, unless the prefetch already had the state hash), then the driver. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "client/blobs.h"
#include "client/pipeline.h"
#include "client/prefetch.h"
#include "client/snapshot.h"
#include "client/upload.h"
#include "common/alloc.h"
#include "common/clock.h"

typedef struct pipeline_request {
  uint32_t kind; /* Pcachepb__EntryKind */
  const VkGraphicsPipelineCreateInfo *graphics;
  const VkComputePipelineCreateInfo *compute;
} pipeline_request;

static void add_tier(pcache_device *device, pcache_tier *tier) {
  pthread_mutex_lock(&device->tiers_lock);
  /* Out of memory: this tier just never gets published, lookups lock. */
  (void)pcache_vec_push(&device->tiers, tier);
  pthread_mutex_unlock(&device->tiers_lock);
}

static int own_pipeline(pcache_device *device, VkPipeline pipeline) {
  int r;
  pthread_mutex_lock(&device->owned_lock);
  r = pcache_vec_push(&device->owned, pipeline);
  if (r == 0) {
    atomic_fetch_add(&device->stats.pipelines, 1);
    atomic_fetch_add(&device->stats.pipelines_this_frame, 1);
  }
  pthread_mutex_unlock(&device->owned_lock);
  return r;
}

static pcache_tier *tier_new(pcache_device *device) {
  pcache_tier *tier = pcache__calloc(1, sizeof *tier);
  if (!tier)
    return NULL;
  tier->device = device;
  if (pcache__table_init(&tier->table) < 0) {
    pcache__free(tier);
    return NULL;
  }
  add_tier(device, tier);
  return tier;
}

static uint64_t make_tier(void *ctx) { return (uint64_t)(uintptr_t)tier_new(ctx); }

/* Tier values are pipelines the device's owned list destroys. */
static void free_tier(uint64_t value, void *ctx) {
  pcache_tier *tier = (pcache_tier *)(uintptr_t)value;
  (void)ctx;
  pcache__table_fini(&tier->table, NULL, NULL);
  pcache__free(tier);
}

static const VkPipelineCreationFeedbackCreateInfo *find_feedback(const void *chain) {
  for (const VkBaseInStructure *s = chain; s; s = s->pNext)
    if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO)
      return (const VkPipelineCreationFeedbackCreateInfo *)s;
  return NULL;
}

/* Creates the pipeline through cache. With creation feedback on, a
 * feedback struct is chained onto a copy of the app's create info (never
 * the app's own); one the app chained itself is used as is. */
static VkResult create_pipeline(pcache_device *d, const pipeline_request *req,
                                VkPipelineCache cache, VkPipeline *ret_pipeline) {
  VkPipelineCreationFeedback feedback = {0};
  VkPipelineCreationFeedback stage_feedback[8];
  VkPipelineCreationFeedbackCreateInfo fb = {
      .sType = VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO,
      .pPipelineCreationFeedback = &feedback,
      .pPipelineStageCreationFeedbacks = stage_feedback};
  const void *app_chain = req->graphics ? req->graphics->pNext : req->compute->pNext;
  const VkPipelineCreationFeedbackCreateInfo *theirs = find_feedback(app_chain);
  const VkPipelineCreationFeedback *result = NULL;
  VkResult vr;
  if (req->graphics) {
    VkGraphicsPipelineCreateInfo ci = *req->graphics;
    if (d->creation_feedback && !theirs) {
      fb.pipelineStageCreationFeedbackCount = ci.stageCount <= 8 ? ci.stageCount : 0;
      fb.pNext = ci.pNext;
      ci.pNext = &fb;
      result = &feedback;
    }
    vr = d->CreateGraphicsPipelines(d->vk_device, cache, 1, &ci, d->allocator, ret_pipeline);
  } else {
    VkComputePipelineCreateInfo ci = *req->compute;
    if (d->creation_feedback && !theirs) {
      fb.pipelineStageCreationFeedbackCount = 1;
      fb.pNext = ci.pNext;
      ci.pNext = &fb;
      result = &feedback;
    }
    vr = d->CreateComputePipelines(d->vk_device, cache, 1, &ci, d->allocator, ret_pipeline);
  }
  if (theirs && d->creation_feedback)
    result = theirs->pPipelineCreationFeedback;
  if (vr == VK_SUCCESS && result && (result->flags & VK_PIPELINE_CREATION_FEEDBACK_VALID_BIT) &&
      (result->flags & VK_PIPELINE_CREATION_FEEDBACK_APPLICATION_PIPELINE_CACHE_HIT_BIT))
    atomic_fetch_add(&d->stats.driver_cache_hits, 1);
  if (vr == VK_SUCCESS && *ret_pipeline == VK_NULL_HANDLE)
    vr = VK_ERROR_UNKNOWN;
  return vr;
}

static VkResult create_with_device_cache(pcache_device *d, const pipeline_request *req,
                                         VkPipeline *ret_pipeline) {
  VkResult vr;
  pthread_rwlock_rdlock(&d->cache_lock);
  vr = create_pipeline(d, req, d->cache, ret_pipeline);
  pthread_rwlock_unlock(&d->cache_lock);
  return vr;
}

static VkResult own(pcache_device *d, VkPipeline pipeline) {
  if (own_pipeline(d, pipeline) < 0) {
    d->DestroyPipeline(d->vk_device, pipeline, d->allocator);
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
  return VK_SUCCESS;
}

/* One Get for a state hash the prefetch did not have. Returns 1 when the
 * daemon's blob is now merged into the device cache. */
static int fetch_from_daemon(pcache_device *d, const pcache__hash *state_hash) {
  Pcachepb__Request request = PCACHEPB__REQUEST__INIT;
  Pcachepb__Get get = PCACHEPB__GET__INIT;
  ProtobufCBinaryData hash = {.len = PCACHE_HASH_SIZE, .data = (uint8_t *)state_hash->bytes};
  pcache__reply reply = {0};
  const Pcachepb__GetReply *got;
  int merged = 0;
  get.device_key.data = d->key.bytes;
  get.device_key.len = PCACHE_DEVKEY_SIZE;
  get.state_hashes = &hash;
  get.n_state_hashes = 1;
  request.body_case = PCACHEPB__REQUEST__BODY_GET;
  request.get = &get;
  if (pcache__client_rpc(d->client, &request, PCACHEPB__RESPONSE__BODY_GET, d->client->timeout_ms,
                         &reply) != 0)
    goto out;
  got = reply.response->get;
  for (size_t i = 0; i < got->n_blobs && !merged; i++) {
    const Pcachepb__Blob *b = got->blobs[i];
    const uint8_t *bytes;
    size_t size;
    Pcachepb__ReportReason reason = 0;
    if (b->state_hash.len != PCACHE_HASH_SIZE ||
        memcmp(b->state_hash.data, state_hash->bytes, PCACHE_HASH_SIZE) != 0)
      continue;
    bytes = pcache__reply_bytes(&reply, b->blob, b->blob_offset, b->blob_size, &size);
    if (pcache__blob_merge(d, bytes, size, b->checksum, &reason) == 0) {
      merged = 1;
      pcache__snapshot_hold(d, state_hash->bytes, 1);
      break;
    }
    atomic_fetch_add(&d->stats.rejected_blobs, 1);
    Pcachepb__ReportItem item = PCACHEPB__REPORT_ITEM__INIT;
    const Pcachepb__ReportItem *items[1] = {&item};
    item.state_hash = hash;
    item.reason = reason;
    pcache__blob_report(d, items, 1);
  }
out:
  pcache__reply_release(&reply);
  return merged;
}

static pcache__upload *upload_new(pcache_device *d, const pipeline_request *req,
                                  const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                                  const void *blob, size_t blob_size, uint64_t compile_ns) {
  pcache__upload *u = pcache__calloc(1, sizeof *u);
  if (!u)
    return NULL;
  u->state_hash = keys->state_hash;
  u->kind = req->kind;
  u->compile_ns = compile_ns;
  u->blob = pcache__malloc(blob_size);
  u->desc = pcache__malloc(desc->size);
  if (!u->blob || !u->desc) {
    pcache__upload_free(u);
    return NULL;
  }
  memcpy(u->blob, blob, blob_size);
  u->blob_size = blob_size;
  memcpy(u->desc, desc->data, desc->size);
  u->desc_size = desc->size;
  /* The code travels with the item: the app may destroy its modules before
   * the upload thread gets to it. */
  if (req->graphics) {
    for (uint32_t i = 0; i < req->graphics->stageCount && u->n_modules < PCACHE_DESC_MAX_MODULES;
         i++) {
      pcache__module *m = pcache__objmap_module(d->objects, req->graphics->pStages[i].module);
      if (m)
        u->modules[u->n_modules++] = m;
    }
  } else {
    pcache__module *m = pcache__objmap_module(d->objects, req->compute->stage.module);
    if (m)
      u->modules[u->n_modules++] = m;
  }
  return u;
}

/* A miss nobody could serve: compile with a fresh cache of its own, so its
 * data is this pipeline's alone (the daemon keys blobs per pipeline), then
 * merge that into the device cache and queue the upload. */
static VkResult compile(pcache_device *d, const pipeline_request *req,
                        const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                        VkPipeline *ret_pipeline) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache fresh;
  VkPipeline pipeline;
  uint64_t start, compile_ns;
  size_t size = 0;
  void *data = NULL;
  VkResult vr;

  if (d->CreatePipelineCache(d->vk_device, &ci, d->allocator, &fresh) != VK_SUCCESS)
    fresh = VK_NULL_HANDLE; /* still build it, just without a blob to share */
  start = pcache__mono_ns();
  vr = create_pipeline(d, req, fresh, &pipeline);
  compile_ns = pcache__mono_ns() - start;
  if (vr != VK_SUCCESS)
    goto out_cache;
  atomic_fetch_add(&d->stats.compiles, 1);
  if (fresh == VK_NULL_HANDLE)
    goto out_done;
  if (d->GetPipelineCacheData(d->vk_device, fresh, &size, NULL) == VK_SUCCESS && size > 0 &&
      (data = pcache__malloc(size)) != NULL &&
      d->GetPipelineCacheData(d->vk_device, fresh, &size, data) == VK_SUCCESS) {
    VkResult merged;
    pthread_rwlock_wrlock(&d->cache_lock);
    merged = d->MergePipelineCaches(d->vk_device, d->cache, 1, &fresh);
    pthread_rwlock_unlock(&d->cache_lock);
    if (merged == VK_SUCCESS)
      pcache__snapshot_hold(d, keys->state_hash.bytes, 1);
    if (d->client) {
      pcache__upload *u = upload_new(d, req, keys, desc, data, size, compile_ns);
      if (u)
        pcache__upload_enqueue(d, u);
    }
  }
out_done:
  *ret_pipeline = pipeline;
out_cache:
  pcache__free(data);
  if (fresh != VK_NULL_HANDLE)
    d->DestroyPipelineCache(d->vk_device, fresh, d->allocator);
  return vr;
}

static VkResult build_hashed(pcache_device *d, const pipeline_request *req,
                             const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                             VkPipeline *ret_pipeline) {
  VkPipeline pipeline;
  VkResult vr;
  int have_blob = 0;
  atomic_fetch_add(&d->stats.misses, 1);
  if (d->client)
    have_blob =
        pcache__prefetch_known(d, &keys->state_hash) || fetch_from_daemon(d, &keys->state_hash);
  if (have_blob) {
    atomic_fetch_add(&d->stats.daemon_hits, 1);
    vr = create_with_device_cache(d, req, &pipeline);
  } else {
    vr = compile(d, req, keys, desc, &pipeline);
  }
  if (vr != VK_SUCCESS)
    return vr;
  vr = own(d, pipeline);
  if (vr == VK_SUCCESS)
    *ret_pipeline = pipeline;
  return vr;
}

/* Built through the device cache, counted, never described to anyone. */
static VkResult build_unhashable(pcache_device *d, const pipeline_request *req,
                                 VkPipeline *ret_pipeline) {
  VkPipeline pipeline;
  VkResult vr;
  atomic_fetch_add(&d->stats.misses, 1);
  atomic_fetch_add(&d->stats.unhashable, 1);
  vr = create_with_device_cache(d, req, &pipeline);
  if (vr != VK_SUCCESS)
    return vr;
  vr = own(d, pipeline);
  if (vr == VK_SUCCESS)
    *ret_pipeline = pipeline;
  return vr;
}

static VkResult vk_result_of(uint64_t stored) { return (VkResult)(int64_t)stored; }

/* The create-info path: describe, then tier 1 by the global part, tier 2
 * by the state hash. */
static VkResult get_by_create_info(pcache_device *d, const pipeline_request *req,
                                   VkPipeline *ret_pipeline) {
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  pcache_pending *claim;
  pcache_tier *tier;
  uint64_t v, k0, k1;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkResult vr;
  void *token;
  int r;

  pcache__desc_buf_init(&buf);
  token = pcache__objmap_read_begin(d->objects);
  r = req->graphics ? pcache__desc_graphics(req->graphics, &d->lookup, &buf, &keys)
                    : pcache__desc_compute(req->compute, &d->lookup, &buf, &keys);
  pcache__objmap_read_end(token);
  if (r == PCACHE_EUNHASHABLE) {
    vr = build_unhashable(d, req, ret_pipeline);
    goto out;
  }
  if (r < 0) {
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    goto out;
  }
  tier = (pcache_tier *)(uintptr_t)pcache__table_get_or_make(&d->hash_tiers, keys.tier1_key, 0,
                                                             make_tier, d);
  if (!tier) {
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    goto out;
  }
  memcpy(&k0, keys.state_hash.bytes, 8);
  memcpy(&k1, keys.state_hash.bytes + 8, 8);
  r = pcache__table_acquire(&tier->table, k0, k1, &v, &claim);
  switch (r) {
  case PCACHE__TABLE_FOUND:
    atomic_fetch_add_explicit(&d->shards[pcache__shard_index()].hits_create_info, 1,
                              memory_order_relaxed);
    *ret_pipeline = pcache__pipeline_from_u64(v);
    vr = VK_SUCCESS;
    break;
  case PCACHE__TABLE_FAILED:
    vr = vk_result_of(v);
    break;
  case PCACHE__TABLE_CLAIMED:
    vr = build_hashed(d, req, &keys, &buf, &pipeline);
    pcache__table_complete(&tier->table, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(pipeline) : 0, (int)vr);
    if (vr == VK_SUCCESS)
      *ret_pipeline = pipeline;
    break;
  default:
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    break;
  }
out:
  pcache__desc_buf_release(&buf);
  return vr;
}

PCACHE_API VkResult pcache_get_graphics_pipeline(pcache_device *device,
                                                 const VkGraphicsPipelineCreateInfo *info,
                                                 VkPipeline *ret_pipeline) {
  pipeline_request req = {.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, .graphics = info};
  if (!device || !info || !ret_pipeline)
    return VK_ERROR_INITIALIZATION_FAILED;
  return get_by_create_info(device, &req, ret_pipeline);
}

PCACHE_API VkResult pcache_get_compute_pipeline(pcache_device *device,
                                                const VkComputePipelineCreateInfo *info,
                                                VkPipeline *ret_pipeline) {
  pipeline_request req = {.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE, .compute = info};
  if (!device || !info || !ret_pipeline)
    return VK_ERROR_INITIALIZATION_FAILED;
  return get_by_create_info(device, &req, ret_pipeline);
}

/* ------------------------------------------------------------ app-key path */

PCACHE_API int pcache_device_select_tier(pcache_device *device, uint64_t global_key,
                                         pcache_tier **ret_tier) {
  pcache_tier *tier;
  if (!device || !ret_tier)
    return -EINVAL;
  tier = (pcache_tier *)(uintptr_t)pcache__table_get_or_make(&device->app_tiers, global_key, 0,
                                                             make_tier, device);
  if (!tier)
    return -ENOMEM;
  *ret_tier = tier;
  return 0;
}

PCACHE_API VkPipeline pcache_tier_lookup(pcache_tier *tier, uint64_t draw_key) {
  uint64_t v;
  if (!tier)
    return VK_NULL_HANDLE;
  v = pcache__table_peek(&tier->table, draw_key, 0);
  if (!v)
    return VK_NULL_HANDLE;
  atomic_fetch_add_explicit(&tier->device->shards[pcache__shard_index()].hits_app_key, 1,
                            memory_order_relaxed);
  return pcache__pipeline_from_u64(v);
}

static VkResult tier_get(pcache_tier *tier, uint64_t draw_key, const pipeline_request *req,
                         VkPipeline *ret_pipeline) {
  pcache_device *d = tier->device;
  pcache_pending *claim;
  VkPipeline pipeline = VK_NULL_HANDLE;
  uint64_t v;
  VkResult vr;
  int r = pcache__table_acquire(&tier->table, draw_key, 0, &v, &claim);
  switch (r) {
  case PCACHE__TABLE_FOUND:
    atomic_fetch_add_explicit(&d->shards[pcache__shard_index()].hits_app_key, 1,
                              memory_order_relaxed);
    *ret_pipeline = pcache__pipeline_from_u64(v);
    return VK_SUCCESS;
  case PCACHE__TABLE_FAILED:
    return vk_result_of(v);
  case PCACHE__TABLE_CLAIMED:
    vr = get_by_create_info(d, req, &pipeline);
    pcache__table_complete(&tier->table, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(pipeline) : 0, (int)vr);
    if (vr == VK_SUCCESS)
      *ret_pipeline = pipeline;
    return vr;
  default:
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
}

PCACHE_API VkResult pcache_tier_get_graphics_pipeline(pcache_tier *tier, uint64_t draw_key,
                                                      const VkGraphicsPipelineCreateInfo *info,
                                                      VkPipeline *ret_pipeline) {
  pipeline_request req = {.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, .graphics = info};
  if (!tier || !info || !ret_pipeline)
    return VK_ERROR_INITIALIZATION_FAILED;
  return tier_get(tier, draw_key, &req, ret_pipeline);
}

PCACHE_API VkResult pcache_tier_get_compute_pipeline(pcache_tier *tier, uint64_t draw_key,
                                                     const VkComputePipelineCreateInfo *info,
                                                     VkPipeline *ret_pipeline) {
  pipeline_request req = {.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE, .compute = info};
  if (!tier || !info || !ret_pipeline)
    return VK_ERROR_INITIALIZATION_FAILED;
  return tier_get(tier, draw_key, &req, ret_pipeline);
}

void pcache__pipeline_end_frame(pcache_device *device) {
  pcache__table_publish(&device->hash_tiers);
  pcache__table_publish(&device->app_tiers);
  pthread_mutex_lock(&device->tiers_lock);
  for (size_t i = 0; i < device->tiers.n; i++)
    pcache__table_publish(&device->tiers.items[i]->table);
  pthread_mutex_unlock(&device->tiers_lock);
  atomic_store(&device->stats.pipelines_this_frame, 0);
}

void pcache__pipeline_release_all(pcache_device *device) {
  pcache__table_fini(&device->hash_tiers, free_tier, device);
  pcache__table_fini(&device->app_tiers, free_tier, device);
  for (size_t i = 0; i < device->owned.n; i++)
    device->DestroyPipeline(device->vk_device, device->owned.items[i], device->allocator);
  pcache_vec_free(&device->owned);
  pcache_vec_free(&device->tiers);
}
