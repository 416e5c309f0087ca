/* Getting a pipeline: the tiers (no lock on a hit), then the daemon (one
 * Get, unless the prefetch already had the state hash), then the driver;
 * batches of them, with derivatives; releasing one; and pass-through,
 * where every request goes to the driver alone. Who owns what is in
 * pcache.h ("Pipelines and who owns them"); the owned set is owned.c. */
#include <errno.h>
#include <stdint.h>
#include <string.h>

#include "client/device.h"
#include "client/build.h"
#include "client/fastlink.h"
#include "client/owned.h"
#include "client/phase.h"
#include "client/pipeline.h"
#include "client/record.h"
#include "common/alloc.h"

typedef struct pipeline_request {
  uint32_t kind; /* Pcachepb__EntryKind */
  const VkGraphicsPipelineCreateInfo *graphics;
  const VkComputePipelineCreateInfo *compute;
} pipeline_request;

static void add_tier(pcache_device *device, pcache_tier *tier) {
  pthread_mutex_lock(&device->tiers.lock);
  /* Out of memory: this tier just never gets published, lookups lock. */
  (void)pcache_vec_push(&device->tiers.list, tier);
  pthread_mutex_unlock(&device->tiers.lock);
}

static pcache_tier *tier_new(pcache_device *device, uint64_t key) {
  pcache_tier *tier = pcache__calloc(1, sizeof *tier);
  if (!tier)
    return NULL;
  tier->device = device;
  tier->key = key;
  if (pcache__table_init(&tier->table) < 0) {
    pcache__free(tier);
    return NULL;
  }
  add_tier(device, tier);
  return tier;
}

typedef struct tier_making {
  pcache_device *device;
  uint64_t key;
} tier_making;

static uint64_t make_tier(void *ctx) {
  tier_making *m = ctx;
  return (uint64_t)(uintptr_t)tier_new(m->device, m->key);
}

static pcache_tier *get_tier(pcache_device *d, pcache__table *table, uint64_t key) {
  tier_making m = {d, key};
  return (pcache_tier *)(uintptr_t)pcache__table_get_or_make(table, key, 0, make_tier, &m);
}

/* The by_hash tier of a state's tier-1 key, the last one first. */
static pcache_tier *tier_by_hash(pcache_device *d, uint64_t tier1_key) {
  pcache_tier *tier = atomic_load_explicit(&d->tiers.last, memory_order_acquire);
  if (tier && tier->key == tier1_key)
    return tier;
  tier = get_tier(d, &d->tiers.by_hash, tier1_key);
  if (tier)
    atomic_store_explicit(&d->tiers.last, tier, memory_order_release);
  return tier;
}

/* Tier values are pipelines the device's owned set destroys. */
static void free_tier(uint64_t value, void *ctx) {
  pcache_tier *tier = (pcache_tier *)(uintptr_t)value;
  (void)ctx;
  pcache__table_fini(&tier->table, NULL, NULL);
  pcache__free(tier);
}

/* Where a pipeline built for a claim of a tier's table will be found: the
 * owned set notes it with the pipeline, under one lock. */
typedef struct tier_key {
  pcache__table *table;
  uint64_t k0, k1;
  /* Out: a fast-linked pipeline's optimization, for the caller to submit
   * once the tier entry is complete: submitted before, an end_frame on
   * another thread could swap it in while the entry is still in flight
   * (pcache__table_replace skips those), moving the owned set's keys to
   * the optimized pipeline while the tier gets the linked one. */
  pcache__fastlink_job *job;
} tier_key;

/* A new pipeline for the caller: the context's with shared ownership (or
 * none, without memory to track it), found under key when there is one,
 * else the app's as it is. */
static VkResult own(pcache_device *d, VkPipeline pipeline, const tier_key *key) {
  VkResult vr;
  if (d->core.ownership == PCACHE_PIPELINES_APP) {
    atomic_fetch_add(&d->core.stats.pipelines_this_frame, 1);
    return VK_SUCCESS;
  }
  PCACHE_PHASE_BEGIN(OWN);
  vr = key ? pcache__owned_add(&d->owned, pipeline, key->table, key->k0, key->k1)
           : pcache__owned_add(&d->owned, pipeline, NULL, 0, 0);
  PCACHE_PHASE_END(OWN);
  if (vr != VK_SUCCESS)
    d->core.DestroyPipeline(d->core.vk_device, pipeline, d->core.allocator);
  return vr;
}

/* Pass-through: the driver, with the app's cache and the context's
 * allocator, as the app would have called it. */
static VkResult create_direct(pcache_device *d, const pipeline_request *req,
                              VkPipeline *ret_pipeline) {
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkResult vr = req->graphics
                    ? d->core.CreateGraphicsPipelines(d->core.vk_device, d->core.given_cache, 1,
                                                      req->graphics, d->core.allocator, &pipeline)
                    : d->core.CreateComputePipelines(d->core.vk_device, d->core.given_cache, 1,
                                                     req->compute, d->core.allocator, &pipeline);
  atomic_fetch_add(&d->core.stats.misses, 1);
  if (vr != VK_SUCCESS)
    return vr;
  vr = own(d, pipeline, NULL);
  if (vr == VK_SUCCESS)
    *ret_pipeline = pipeline;
  return vr;
}

/* Built (build.c) with the device cache and the context's allocator, then
 * owned as the context's ownership says. claim: the caller holds a tier's
 * claim on the state hash (so this is the one build of it), under which
 * the pipeline will be found; NULL when none. */
static VkResult build_owned(pcache_device *d, const pipeline_request *req,
                            const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                            int driver_asked, tier_key *claim, VkPipeline *ret_pipeline) {
  pcache__build b = {.kind = req->kind,
                     .graphics = req->graphics,
                     .compute = req->compute,
                     .allocator = d->core.allocator,
                     .driver_asked = driver_asked,
                     .claimed = claim != NULL};
  pcache__build_source source;
  pcache__fastlink_job *job = NULL;
  VkPipeline pipeline;
  VkResult vr = !keys ? pcache__build_unhashable(d, &b, &pipeline)
                : pcache__fastlink_applies(d, &b)
                    ? pcache__fastlink_build(d, &b, keys, desc, &pipeline, &job)
                    : pcache__build_hashed(d, &b, keys, desc, &pipeline, &source);
  if (vr != VK_SUCCESS)
    return vr;
  vr = own(d, pipeline, claim);
  if (vr == VK_SUCCESS)
    *ret_pipeline = pipeline;
  /* A fast-linked pipeline's optimization, once the context knows the
   * handle it replaces (and, under a tier's claim, once the caller has
   * completed the tier's entry). */
  if (claim && vr == VK_SUCCESS)
    claim->job = job;
  else
    pcache__fastlink_submit(d, job, vr == VK_SUCCESS ? pipeline : VK_NULL_HANDLE);
  return vr;
}

static VkResult vk_result_of(uint64_t stored) { return (VkResult)(int64_t)stored; }

/* The create-info path: describe, then tier 1 by the global part, tier 2
 * by the state hash. */
static VkResult by_create_info(pcache_device *d, const pipeline_request *req,
                               VkPipeline *ret_pipeline) {
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  pcache_pending *claim;
  pcache_tier *tier;
  uint64_t v, k0, k1;
  VkPipeline pipeline = VK_NULL_HANDLE;
  VkResult vr;
  int r;
  pcache__build b = {.kind = req->kind,
                     .graphics = req->graphics,
                     .compute = req->compute,
                     .allocator = d->core.allocator};

  if (d->core.passthrough)
    return create_direct(d, req, ret_pipeline);
  /* A pipeline per call: no tier needs the state hash, so the driver is
   * asked before anything is described, as the layer does; a hit costs
   * what it costs without pcache. */
  if (d->core.ownership == PCACHE_PIPELINES_APP && pcache__build_probe_first(d, &b, &pipeline)) {
    atomic_fetch_add(&d->core.stats.misses, 1);
    vr = own(d, pipeline, NULL);
    if (vr == VK_SUCCESS)
      *ret_pipeline = pipeline;
    return vr;
  }
  pcache__desc_buf_init(&buf);
  PCACHE_PHASE_BEGIN(DESCRIBE);
  r = pcache__build_describe(d, &b, &buf, &keys);
  PCACHE_PHASE_END(DESCRIBE);
  if (r == PCACHE_EUNHASHABLE) {
    vr = build_owned(d, req, NULL, NULL, b.driver_asked, NULL, ret_pipeline);
    goto out;
  }
  if (r < 0) {
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    goto out;
  }
  if (d->core.ownership == PCACHE_PIPELINES_APP) {
    /* The tiers, which hand one pipeline out many times, are skipped; the
     * device cache still makes a repeat cheap. */
    vr = build_owned(d, req, &keys, &buf, b.driver_asked, NULL, ret_pipeline);
    goto out;
  }
  PCACHE_PHASE_BEGIN(TIER);
  tier = tier_by_hash(d, keys.tier1_key);
  if (!tier) {
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    goto out;
  }
  memcpy(&k0, keys.state_hash.bytes, 8);
  memcpy(&k1, keys.state_hash.bytes + 8, 8);
  r = pcache__table_acquire(&tier->table, k0, k1, &v, &claim);
  PCACHE_PHASE_END(TIER);
  switch (r) {
  case PCACHE__TABLE_FOUND:
    atomic_fetch_add_explicit(&d->core.shards[pcache__shard_index()].hits_create_info, 1,
                              memory_order_relaxed);
    *ret_pipeline = pcache__pipeline_from_u64(v);
    vr = VK_SUCCESS;
    break;
  case PCACHE__TABLE_FAILED:
    vr = vk_result_of(v);
    break;
  case PCACHE__TABLE_CLAIMED: {
    tier_key key = {&tier->table, k0, k1, NULL};
    vr = build_owned(d, req, &keys, &buf, 0, &key, &pipeline);
    pcache__table_complete(&tier->table, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(pipeline) : 0, (int)vr);
    if (vr == VK_SUCCESS) {
      pcache__fastlink_submit(d, key.job, pipeline);
      *ret_pipeline = pipeline;
    }
    break;
  }
  default:
    vr = VK_ERROR_OUT_OF_HOST_MEMORY;
    break;
  }
out:
  pcache__desc_buf_release(&buf);
  return vr;
}

static VkResult get_by_create_info(pcache_device *d, const pipeline_request *req,
                                   VkPipeline *ret_pipeline) {
  PCACHE_PHASE_BEGIN(TOTAL);
  VkResult vr = by_create_info(d, req, ret_pipeline);
  PCACHE_PHASE_END(TOTAL);
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

PCACHE_API VkResult pcache_prepare_graphics_pipeline(pcache_device *device,
                                                     const VkGraphicsPipelineCreateInfo *info) {
  pcache__build b = {.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, .graphics = info};
  if (!device || !info)
    return VK_ERROR_INITIALIZATION_FAILED;
  b.allocator = device->core.allocator;
  if (device->core.passthrough || !pcache__fastlink_applies(device, &b))
    return VK_ERROR_FEATURE_NOT_PRESENT;
  return pcache__fastlink_prepare(device, &b);
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
  if (!device || !ret_tier || device->core.ownership == PCACHE_PIPELINES_APP)
    return -EINVAL;
  tier = get_tier(device, &device->tiers.by_app, global_key);
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
  atomic_fetch_add_explicit(&tier->device->core.shards[pcache__shard_index()].hits_app_key, 1,
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
    atomic_fetch_add_explicit(&d->core.shards[pcache__shard_index()].hits_app_key, 1,
                              memory_order_relaxed);
    *ret_pipeline = pcache__pipeline_from_u64(v);
    return VK_SUCCESS;
  case PCACHE__TABLE_FAILED:
    return vk_result_of(v);
  case PCACHE__TABLE_CLAIMED:
    vr = get_by_create_info(d, req, &pipeline);
    pcache__table_complete(&tier->table, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(pipeline) : 0, (int)vr);
    if (vr == VK_SUCCESS) {
      pcache__owned_note(&d->owned, pipeline, &tier->table, draw_key, 0);
      *ret_pipeline = pipeline;
    }
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
  pcache__table_publish(&device->tiers.by_hash);
  pcache__table_publish(&device->tiers.by_app);
  pthread_mutex_lock(&device->tiers.lock);
  for (size_t i = 0; i < device->tiers.list.n; i++)
    pcache__table_publish(&device->tiers.list.items[i]->table);
  pthread_mutex_unlock(&device->tiers.lock);
  atomic_store(&device->core.stats.pipelines_this_frame, 0);
}

void pcache__pipeline_release_all(pcache_device *device) {
  pcache__table_fini(&device->tiers.by_hash, free_tier, device);
  pcache__table_fini(&device->tiers.by_app, free_tier, device);
  pcache__owned_fini(&device->owned);
  pcache_vec_free(&device->tiers.list);
}

/* ----------------------------------------------------------------- batches */

/* Element i of a batch, its base index resolved to the handle an earlier
 * element got (the pipelines are made one at a time, so a base index
 * cannot reach the driver). An index that is not an earlier element is
 * VK_ERROR_INITIALIZATION_FAILED. A base that failed leaves the element to
 * be built as a pipeline of its own (a derivative is only a hint), as the
 * layer does (layer/pipelines.c). */
static VkResult resolve_base(const void *chain, VkPipelineCreateFlags *flags, int32_t *index,
                             VkPipeline *handle, uint32_t i, const VkPipeline *pipelines) {
  int in_flags2;
  if (!(pcache__pipeline_flags(chain, *flags, &in_flags2) & VK_PIPELINE_CREATE_DERIVATIVE_BIT) ||
      *index == -1)
    return VK_SUCCESS;
  if (*index < 0 || (uint32_t)*index >= i)
    return VK_ERROR_INITIALIZATION_FAILED;
  *handle = pipelines[*index];
  *index = -1;
  if (*handle == VK_NULL_HANDLE && !in_flags2)
    *flags &= ~(VkPipelineCreateFlags)VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  return VK_SUCCESS;
}

/* A batch of either kind (exactly one of graphics and compute), element
 * by element, as pcache.h says. */
static VkResult create_batch(pcache_device *d, uint32_t count,
                             const VkGraphicsPipelineCreateInfo *graphics,
                             const VkComputePipelineCreateInfo *compute,
                             VkPipeline *ret_pipelines) {
  VkResult first_failure = VK_SUCCESS;
  if (!d || (count && ((!graphics && !compute) || !ret_pipelines)))
    return VK_ERROR_INITIALIZATION_FAILED;
  for (uint32_t i = 0; i < count; i++)
    ret_pipelines[i] = VK_NULL_HANDLE;
  for (uint32_t i = 0; i < count; i++) {
    VkGraphicsPipelineCreateInfo gci;
    VkComputePipelineCreateInfo cci;
    pipeline_request req;
    VkResult vr;
    int in_flags2;
    if (graphics) {
      gci = graphics[i];
      req = (pipeline_request){.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, .graphics = &gci};
      vr = resolve_base(gci.pNext, &gci.flags, &gci.basePipelineIndex, &gci.basePipelineHandle, i,
                        ret_pipelines);
    } else {
      cci = compute[i];
      req = (pipeline_request){.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE, .compute = &cci};
      vr = resolve_base(cci.pNext, &cci.flags, &cci.basePipelineIndex, &cci.basePipelineHandle, i,
                        ret_pipelines);
    }
    if (vr == VK_SUCCESS)
      vr = get_by_create_info(d, &req, &ret_pipelines[i]);
    if (vr == VK_SUCCESS)
      continue;
    ret_pipelines[i] = VK_NULL_HANDLE;
    if (first_failure == VK_SUCCESS)
      first_failure = vr;
    if (pcache__pipeline_flags(graphics ? gci.pNext : cci.pNext, graphics ? gci.flags : cci.flags,
                               &in_flags2) &
        VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT)
      break;
  }
  return first_failure;
}

PCACHE_API VkResult pcache_create_graphics_pipelines(pcache_device *device, uint32_t count,
                                                     const VkGraphicsPipelineCreateInfo *infos,
                                                     VkPipeline *ret_pipelines) {
  return create_batch(device, count, infos, NULL, ret_pipelines);
}

PCACHE_API VkResult pcache_create_compute_pipelines(pcache_device *device, uint32_t count,
                                                    const VkComputePipelineCreateInfo *infos,
                                                    VkPipeline *ret_pipelines) {
  return create_batch(device, count, NULL, infos, ret_pipelines);
}

PCACHE_API int pcache_release_pipeline(pcache_device *device, VkPipeline pipeline) {
  if (!device)
    return -EINVAL;
  if (pipeline == VK_NULL_HANDLE)
    return 0;
  if (device->core.ownership == PCACHE_PIPELINES_SHARED)
    return pcache__owned_release(&device->owned, pipeline);
  /* The app's own: exactly vkDestroyPipeline. */
  pcache__record_forget(&device->core, PCACHE_OBJ_PIPELINE_LIBRARY,
                        pcache__pipeline_to_u64(pipeline));
  device->core.DestroyPipeline(device->core.vk_device, pipeline, device->core.allocator);
  atomic_fetch_add(&device->core.stats.released, 1);
  return 0;
}
