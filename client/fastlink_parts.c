/* Fast linking's parts: a complete graphics pipeline split into its four
 * libraries, each found by its part hash or built through build.c, and
 * libraries linked into a pipeline, fast or with link-time optimization.
 * Its own file, under fastlink.c (the pool of optimizing threads, the
 * frames' budget and the swaps): what is here runs on whichever thread
 * calls it and knows nothing of jobs or frames. */
#include "client/device.h"
#include "client/fastlink_parts.h"

#include "client/record.h"
#include "common/clock.h"

/* The parts in the order of VkGraphicsPipelineLibraryFlagBitsEXT. */
static const VkGraphicsPipelineLibraryFlagsEXT part_bits[PCACHE__FASTLINK_PARTS] = {
    VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT};

static void part_info_make(pcache_device *d, const VkGraphicsPipelineCreateInfo *app, uint32_t i,
                           pcache__fastlink_part *p) {
  p->lib = (VkGraphicsPipelineLibraryCreateInfoEXT){
      .sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_LIBRARY_CREATE_INFO_EXT,
      .pNext = (void *)(uintptr_t)app->pNext, /* read only, as the app's own */
      .flags = part_bits[i]};
  p->ci = *app;
  p->ci.pNext = &p->lib;
  p->ci.flags = VK_PIPELINE_CREATE_LIBRARY_BIT_KHR |
                VK_PIPELINE_CREATE_RETAIN_LINK_TIME_OPTIMIZATION_INFO_BIT_EXT;
  p->ci.basePipelineHandle = VK_NULL_HANDLE;
  p->ci.basePipelineIndex = -1;
  p->ci.stageCount = 0;
  p->ci.pStages = p->stages;
  for (uint32_t s = 0; s < app->stageCount; s++) {
    int fragment = app->pStages[s].stage == VK_SHADER_STAGE_FRAGMENT_BIT;
    if ((part_bits[i] == VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT &&
         !fragment) ||
        (part_bits[i] == VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT && fragment))
      p->stages[p->ci.stageCount++] = app->pStages[s];
  }
  p->build = (pcache__build){.kind = PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS,
                             .graphics = &p->ci,
                             .allocator = d->core.allocator};
  pcache__desc_buf_init(&p->desc);
}

/* Part i's library: the context's own by its part hash, or built (from the
 * daemon, the device cache, or compiled and uploaded) and kept. Two
 * threads wanting one part build it once; *ret_found says whether it was
 * there already (or built by the other). */
static VkResult get_part(pcache_device *d, pcache__table *table, pcache__fastlink_part *p,
                         VkPipeline *ret_library, int *ret_found) {
  pcache__build_source source;
  pcache_pending *claim;
  uint64_t k0, k1, v;
  VkResult vr;
  *ret_found = 0;
  pcache__hash_keys(p->keys.state_hash.bytes, &k0, &k1);
  switch (pcache__table_acquire(table, k0, k1, &v, &claim)) {
  case PCACHE__TABLE_FOUND:
    *ret_library = pcache__pipeline_from_u64(v);
    *ret_found = 1;
    return VK_SUCCESS;
  case PCACHE__TABLE_CLAIMED:
    vr = pcache__build_hashed(d, &p->build, &p->keys, &p->desc, ret_library, &source);
    pcache__table_complete(table, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(*ret_library) : 0, (int)vr);
    if (vr == VK_SUCCESS)
      atomic_fetch_add(&d->core.stats.parts_made, 1);
    return vr;
  case PCACHE__TABLE_FAILED:
    return (VkResult)(int64_t)v; /* the driver refused this part just now */
  default:
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
}

VkResult pcache__fastlink_get_parts(pcache_device *d, pcache__table *table, const pcache__build *b,
                                    pcache__fastlink_part parts[PCACHE__FASTLINK_PARTS],
                                    VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                                    uint32_t *ret_described, uint32_t *ret_found) {
  VkResult vr = VK_SUCCESS;
  *ret_found = 0;
  for (*ret_described = 0; *ret_described < PCACHE__FASTLINK_PARTS; (*ret_described)++) {
    pcache__fastlink_part *p = &parts[*ret_described];
    part_info_make(d, b->graphics, *ret_described, p);
    if (pcache__build_describe(d, &p->build, &p->desc, &p->keys) != 0) {
      pcache__desc_buf_release(&p->desc);
      return VK_ERROR_FEATURE_NOT_PRESENT;
    }
  }
  for (uint32_t i = 0; i < PCACHE__FASTLINK_PARTS && vr == VK_SUCCESS; i++) {
    int found;
    vr = get_part(d, table, &parts[i], &libraries[i], &found);
    *ret_found += (uint32_t)found;
  }
  return vr;
}

void pcache__fastlink_free_library(uint64_t value, void *ctx) {
  pcache_device *d = ctx;
  pcache__record_forget(&d->core, PCACHE_OBJ_PIPELINE_LIBRARY, value);
  d->core.DestroyPipeline(d->core.vk_device, pcache__pipeline_from_u64(value), d->core.allocator);
}

VkResult pcache__fastlink_link(pcache_device *d, const VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                               VkPipelineLayout layout, VkPipelineCreateFlags flags,
                               VkPipelineCache cache, VkPipeline *ret_pipeline) {
  VkPipelineLibraryCreateInfoKHR li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
                                       .libraryCount = PCACHE__FASTLINK_PARTS,
                                       .pLibraries = libraries};
  VkGraphicsPipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                     .pNext = &li,
                                     .flags = flags,
                                     .layout = layout,
                                     .basePipelineIndex = -1};
  VkResult vr;
  if (cache == d->core.cache)
    pthread_rwlock_rdlock(&d->core.cache_lock);
  vr = d->core.CreateGraphicsPipelines(d->core.vk_device, cache, 1, &ci, d->core.allocator,
                                       ret_pipeline);
  if (cache == d->core.cache)
    pthread_rwlock_unlock(&d->core.cache_lock);
  if (vr == VK_SUCCESS && *ret_pipeline == VK_NULL_HANDLE)
    vr = VK_ERROR_UNKNOWN;
  return vr;
}

VkResult pcache__fastlink_optimize(pcache_device *d,
                                   const VkPipeline libraries[PCACHE__FASTLINK_PARTS],
                                   VkPipelineLayout layout, pcache__build_kept *kept,
                                   VkPipeline *ret_pipeline) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache fresh;
  uint64_t start;
  VkResult vr;
  if (d->core.CreatePipelineCache(d->core.vk_device, &ci, d->core.allocator, &fresh) != VK_SUCCESS)
    fresh = VK_NULL_HANDLE; /* still built, just without a blob to share */
  start = pcache__mono_ns();
  vr = pcache__fastlink_link(
      d, libraries, layout, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT, fresh, ret_pipeline);
  kept->compile_ns = pcache__mono_ns() - start;
  if (vr == VK_SUCCESS) {
    atomic_fetch_add(&d->core.stats.compiles, 1);
    if (fresh != VK_NULL_HANDLE) {
      pcache__build_keep(d, fresh, kept);
      kept->n_modules = 0;
    }
  }
  for (size_t i = 0; i < kept->n_modules; i++)
    pcache__module_unref(kept->modules[i]);
  kept->n_modules = 0;
  if (fresh != VK_NULL_HANDLE)
    d->core.DestroyPipelineCache(d->core.vk_device, fresh, d->core.allocator);
  return vr;
}
