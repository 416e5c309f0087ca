/* Misses without a stall: see fastlink.h. The optimized pipeline is the
 * four libraries linked with link-time optimization (they are built with
 * RETAIN_LINK_TIME_OPTIMIZATION_INFO for that), so a background job needs
 * only the libraries, which the context owns, and the pipeline layout,
 * which the app's pcache_destroy_pipeline_layout waits for: nothing of the
 * app's create info outlives the call. Its cache data is kept under the
 * complete pipeline's state hash, so a later miss of that state (here or in
 * the next run, from the daemon) links the same libraries with
 * optimization again and finds it in the device cache. */
#include <errno.h>
#include <string.h>

#include "client/fastlink.h"
#include "client/owned.h"
#include "client/record.h"
#include "common/alloc.h"
#include "common/clock.h"

#define PARTS 4
#define MAX_THREADS 8
#define MAX_STAGES 8
#define DEFAULT_PER_FRAME 4

/* The parts in the order of VkGraphicsPipelineLibraryFlagBitsEXT. */
static const VkGraphicsPipelineLibraryFlagsEXT part_bits[PARTS] = {
    VK_GRAPHICS_PIPELINE_LIBRARY_VERTEX_INPUT_INTERFACE_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_PRE_RASTERIZATION_SHADERS_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_SHADER_BIT_EXT,
    VK_GRAPHICS_PIPELINE_LIBRARY_FRAGMENT_OUTPUT_INTERFACE_BIT_EXT};

struct pcache__fastlink_job {
  pcache__fastlink_job *next;
  VkPipeline libraries[PARTS]; /* the context's (parts table) */
  VkPipelineLayout layout;     /* the app's: see pcache__fastlink_forget_layout */
  pcache__desc_keys keys;      /* the complete pipeline's */
  pcache__build_kept kept;     /* points at keys and the copied description */
  VkPipeline linked, optimized;
  uint64_t linked_ns, linked_frame;
};

typedef struct pcache__fastlink {
  uint32_t mode; /* PCACHE_FAST_LINK_* */
  pthread_mutex_t lock;
  pthread_cond_t work; /* a job queued, a new frame's budget, or stop */
  pthread_cond_t idle; /* a job finished */
  pcache__fastlink_job *queue, **queue_tail, *running, *done;
  uint32_t per_frame, budget; /* compiles the pool may start per frame, and this frame */
  uint64_t frame;             /* end_frame calls so far */
  int stop;
  size_t n_threads;
  pthread_t threads[MAX_THREADS];
  pcache__table parts; /* part state hash -> library */
} pcache__fastlink;

/* ------------------------------------------------------------- the parts */

/* One part's create info: the app's, with the part's flag and only its
 * stages; the driver ignores the state of other parts. Do not copy. */
typedef struct part_info {
  VkGraphicsPipelineCreateInfo ci;
  VkGraphicsPipelineLibraryCreateInfoEXT lib;
  VkPipelineShaderStageCreateInfo stages[MAX_STAGES];
  pcache__build build;
  pcache__desc_buf desc;
  pcache__desc_keys keys;
} part_info;

static void part_info_make(pcache_device *d, const VkGraphicsPipelineCreateInfo *app, uint32_t i,
                           part_info *p) {
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
                             .allocator = d->allocator};
  pcache__desc_buf_init(&p->desc);
}

/* Part i's library: the context's own by its part hash, or built (from the
 * daemon, the device cache, or compiled and uploaded) and kept. Two
 * threads wanting one part build it once; *ret_found says whether it was
 * there already (or built by the other). */
static VkResult get_part(pcache_device *d, part_info *p, VkPipeline *ret_library, int *ret_found) {
  pcache__fastlink *fl = d->fastlink;
  pcache__build_source source;
  pcache_pending *claim;
  uint64_t k0, k1, v;
  VkResult vr;
  *ret_found = 0;
  pcache__hash_keys(p->keys.state_hash.bytes, &k0, &k1);
  switch (pcache__table_acquire(&fl->parts, k0, k1, &v, &claim)) {
  case PCACHE__TABLE_FOUND:
    *ret_library = pcache__pipeline_from_u64(v);
    *ret_found = 1;
    return VK_SUCCESS;
  case PCACHE__TABLE_CLAIMED:
    vr = pcache__build_hashed(d, &p->build, &p->keys, &p->desc, ret_library, &source);
    pcache__table_complete(&fl->parts, claim,
                           vr == VK_SUCCESS ? pcache__pipeline_to_u64(*ret_library) : 0, (int)vr);
    if (vr == VK_SUCCESS)
      atomic_fetch_add(&d->stats.parts_made, 1);
    return vr;
  case PCACHE__TABLE_FAILED:
    return (VkResult)(int64_t)v; /* the driver refused this part just now */
  default:
    return VK_ERROR_OUT_OF_HOST_MEMORY;
  }
}

/* The four parts of b's pipeline: described into parts (the caller
 * releases parts[i].desc for i < *ret_described), then each found or
 * built. Returns VK_SUCCESS with *ret_found the parts that were there
 * already, VK_ERROR_FEATURE_NOT_PRESENT when a part cannot be described
 * (nothing built), or a part's VkResult. */
static VkResult get_parts(pcache_device *d, const pcache__build *b, part_info parts[PARTS],
                          VkPipeline libraries[PARTS], uint32_t *ret_described,
                          uint32_t *ret_found) {
  VkResult vr = VK_SUCCESS;
  *ret_found = 0;
  for (*ret_described = 0; *ret_described < PARTS; (*ret_described)++) {
    part_info *p = &parts[*ret_described];
    part_info_make(d, b->graphics, *ret_described, p);
    if (pcache__build_describe(d, &p->build, &p->desc, &p->keys) != 0) {
      pcache__desc_buf_release(&p->desc);
      return VK_ERROR_FEATURE_NOT_PRESENT;
    }
  }
  for (uint32_t i = 0; i < PARTS && vr == VK_SUCCESS; i++) {
    int found;
    vr = get_part(d, &parts[i], &libraries[i], &found);
    *ret_found += (uint32_t)found;
  }
  return vr;
}

static void free_library(uint64_t value, void *ctx) {
  pcache_device *d = ctx;
  pcache__record_forget(d, PCACHE_OBJ_PIPELINE_LIBRARY, value);
  d->DestroyPipeline(d->vk_device, pcache__pipeline_from_u64(value), d->allocator);
}

/* The libraries linked (flags: 0 or link-time optimization) through cache;
 * the device cache under its read side. */
static VkResult link(pcache_device *d, const VkPipeline libraries[PARTS], VkPipelineLayout layout,
                     VkPipelineCreateFlags flags, VkPipelineCache cache, VkPipeline *ret_pipeline) {
  VkPipelineLibraryCreateInfoKHR li = {.sType = VK_STRUCTURE_TYPE_PIPELINE_LIBRARY_CREATE_INFO_KHR,
                                       .libraryCount = PARTS,
                                       .pLibraries = libraries};
  VkGraphicsPipelineCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_GRAPHICS_PIPELINE_CREATE_INFO,
                                     .pNext = &li,
                                     .flags = flags,
                                     .layout = layout,
                                     .basePipelineIndex = -1};
  VkResult vr;
  if (cache == d->cache)
    pthread_rwlock_rdlock(&d->cache_lock);
  vr = d->CreateGraphicsPipelines(d->vk_device, cache, 1, &ci, d->allocator, ret_pipeline);
  if (cache == d->cache)
    pthread_rwlock_unlock(&d->cache_lock);
  if (vr == VK_SUCCESS && *ret_pipeline == VK_NULL_HANDLE)
    vr = VK_ERROR_UNKNOWN;
  return vr;
}

/* The optimized pipeline, compiled through a fresh cache whose data is
 * kept (device cache, upload) under kept's state hash. kept's module
 * references are released. */
static VkResult optimize(pcache_device *d, const VkPipeline libraries[PARTS],
                         VkPipelineLayout layout, pcache__build_kept *kept,
                         VkPipeline *ret_pipeline) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache fresh;
  uint64_t start;
  VkResult vr;
  if (d->CreatePipelineCache(d->vk_device, &ci, d->allocator, &fresh) != VK_SUCCESS)
    fresh = VK_NULL_HANDLE; /* still built, just without a blob to share */
  start = pcache__mono_ns();
  vr = link(d, libraries, layout, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT, fresh,
            ret_pipeline);
  kept->compile_ns = pcache__mono_ns() - start;
  if (vr == VK_SUCCESS) {
    atomic_fetch_add(&d->stats.compiles, 1);
    if (fresh != VK_NULL_HANDLE) {
      pcache__build_keep(d, fresh, kept);
      kept->n_modules = 0;
    }
  }
  for (size_t i = 0; i < kept->n_modules; i++)
    pcache__module_unref(kept->modules[i]);
  kept->n_modules = 0;
  if (fresh != VK_NULL_HANDLE)
    d->DestroyPipelineCache(d->vk_device, fresh, d->allocator);
  return vr;
}

/* --------------------------------------------------------------- the jobs */

static void job_free(pcache__fastlink_job *j) {
  for (size_t i = 0; i < j->kept.n_modules; i++)
    pcache__module_unref(j->kept.modules[i]);
  pcache__free((void *)j->kept.desc);
  pcache__free(j);
}

static pcache__fastlink_job *job_new(pcache_device *d, const pcache__build *b,
                                     const VkPipeline libraries[PARTS],
                                     const pcache__desc_keys *keys, const pcache__desc_buf *desc) {
  pcache__fastlink_job *j = pcache__calloc(1, sizeof *j);
  uint8_t *copy = pcache__malloc(desc->size);
  if (!j || !copy) {
    pcache__free(j);
    pcache__free(copy);
    return NULL;
  }
  memcpy(copy, desc->data, desc->size);
  memcpy(j->libraries, libraries, sizeof j->libraries);
  j->layout = b->graphics->layout;
  j->keys = *keys;
  j->kept = (pcache__build_kept){
      .kind = b->kind, .keys = &j->keys, .desc = copy, .desc_size = desc->size};
  if (d->client) /* the code travels with the upload */
    j->kept.n_modules = pcache__build_modules(d, b, j->kept.modules);
  return j;
}

static int same_state(const pcache__fastlink_job *j, const pcache__desc_keys *keys) {
  for (; j; j = j->next)
    if (memcmp(j->keys.state_hash.bytes, keys->state_hash.bytes, PCACHE_HASH_SIZE) == 0)
      return 1;
  return 0;
}

static void unlink_job(pcache__fastlink_job **list, pcache__fastlink_job *j) {
  while (*list != j)
    list = &(*list)->next;
  *list = j->next;
}

static void *worker(void *arg) {
  pcache_device *d = arg;
  pcache__fastlink *fl = d->fastlink;
  pthread_mutex_lock(&fl->lock);
  for (;;) {
    pcache__fastlink_job *j;
    VkResult vr;
    while (!fl->stop && !(fl->queue && fl->budget))
      pthread_cond_wait(&fl->work, &fl->lock);
    if (fl->stop)
      break;
    j = fl->queue;
    fl->queue = j->next;
    if (!fl->queue)
      fl->queue_tail = &fl->queue;
    fl->budget--;
    j->next = fl->running;
    fl->running = j;
    pthread_mutex_unlock(&fl->lock);

    vr = optimize(d, j->libraries, j->layout, &j->kept, &j->optimized);
    if (vr == VK_SUCCESS) {
      uint64_t k0, k1;
      atomic_fetch_add(&d->stats.optimized, 1);
      /* The device cache holds it now: later misses link it from there. */
      pcache__hash_keys(j->keys.state_hash.bytes, &k0, &k1);
      (void)pcache__table_insert(&d->built, k0, k1, 1);
      if (d->ownership == PCACHE_PIPELINES_APP) {
        /* The app's handles are its own: nothing to swap. */
        d->DestroyPipeline(d->vk_device, j->optimized, d->allocator);
        j->optimized = VK_NULL_HANDLE;
      }
    } else {
      j->optimized = VK_NULL_HANDLE; /* the linked pipeline stays in use */
    }

    pthread_mutex_lock(&fl->lock);
    unlink_job(&fl->running, j);
    if (j->optimized != VK_NULL_HANDLE) {
      j->next = fl->done;
      fl->done = j;
    } else {
      job_free(j);
    }
    pthread_cond_broadcast(&fl->idle);
  }
  pthread_mutex_unlock(&fl->lock);
  return NULL;
}

/* ------------------------------------------------------------- the device */

/* The device supports what mode needs (features and properties are
 * Vulkan 1.1 queries, so an older instance gets none). */
static int supported(pcache_device *d, uint32_t mode, PFN_vkGetInstanceProcAddr gipa) {
  PFN_vkGetPhysicalDeviceFeatures2 features2 =
      (PFN_vkGetPhysicalDeviceFeatures2)gipa(d->instance, "vkGetPhysicalDeviceFeatures2");
  PFN_vkGetPhysicalDeviceProperties2 props2 =
      (PFN_vkGetPhysicalDeviceProperties2)gipa(d->instance, "vkGetPhysicalDeviceProperties2");
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl_features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                 .pNext = &gpl_features};
  VkPhysicalDeviceGraphicsPipelineLibraryPropertiesEXT gpl_props = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                   .pNext = &gpl_props};
  if (d->instance_api_version < VK_API_VERSION_1_1 || !features2 || !props2)
    return 0;
  features2(d->physical_device, &f);
  props2(d->physical_device, &p);
  return gpl_features.graphicsPipelineLibrary &&
         (mode != PCACHE_FAST_LINK_THEN_OPTIMIZE || gpl_props.graphicsPipelineLibraryFastLinking);
}

void pcache__fastlink_start(pcache_device *d, const pcache_device_info *info,
                            PFN_vkGetInstanceProcAddr gipa) {
  pcache__fastlink *fl;
  size_t want;
  if (info->fast_link == PCACHE_FAST_LINK_NEVER || d->passthrough)
    return;
  if (!supported(d, info->fast_link, gipa)) {
    pcache__log(d->log, PCACHE_SEVERITY_INFO,
                "fast_link: the device lacks graphicsPipelineLibrary%s (or the instance is "
                "below Vulkan 1.1): misses compile in the caller's thread",
                info->fast_link == PCACHE_FAST_LINK_THEN_OPTIMIZE ? " with fast linking" : "");
    return;
  }
  fl = pcache__calloc(1, sizeof *fl);
  if (!fl)
    goto out_nomem;
  fl->mode = info->fast_link;
  fl->queue_tail = &fl->queue;
  fl->per_frame = info->fast_link_per_frame ? info->fast_link_per_frame : DEFAULT_PER_FRAME;
  fl->budget = fl->per_frame;
  if (pcache__table_init(&fl->parts) < 0)
    goto out_free;
  if (pthread_mutex_init(&fl->lock, NULL) != 0)
    goto out_parts;
  if (pthread_cond_init(&fl->work, NULL) != 0)
    goto out_lock;
  if (pthread_cond_init(&fl->idle, NULL) != 0)
    goto out_work;
  d->fastlink = fl;
  want = fl->mode != PCACHE_FAST_LINK_THEN_OPTIMIZE ? 0
         : info->fast_link_threads == 0             ? 1
         : info->fast_link_threads > MAX_THREADS    ? MAX_THREADS
                                                    : info->fast_link_threads;
  while (fl->n_threads < want && pthread_create(&fl->threads[fl->n_threads], NULL, worker, d) == 0)
    fl->n_threads++;
  if (fl->n_threads < want && fl->n_threads == 0) {
    pcache__fastlink_stop(d); /* no thread to optimize: fast linking alone would never end */
    goto out_nomem;
  }
  return;
out_work:
  pthread_cond_destroy(&fl->work);
out_lock:
  pthread_mutex_destroy(&fl->lock);
out_parts:
  pcache__table_fini(&fl->parts, NULL, NULL);
out_free:
  pcache__free(fl);
out_nomem:
  pcache__log(d->log, PCACHE_SEVERITY_WARNING,
              "fast_link: out of memory or threads: misses compile in the caller's thread");
}

int pcache__fastlink_applies(const pcache_device *d, const pcache__build *b) {
  const VkGraphicsPipelineCreateInfo *ci = b->graphics;
  if (!d->fastlink || !ci || ci->flags != 0 || ci->stageCount > MAX_STAGES ||
      pcache__desc_graphics_parts(ci) != PCACHE_DESC_ALL_PARTS)
    return 0;
  for (const VkBaseInStructure *s = ci->pNext; s; s = s->pNext)
    /* Flags2 would override the libraries' flags; a feedback struct sized
     * for the app's stages does not fit a part's. */
    if (s->sType == VK_STRUCTURE_TYPE_PIPELINE_CREATION_FEEDBACK_CREATE_INFO ||
        s->sType == (VkStructureType)1000470005 /* VkPipelineCreateFlags2CreateInfoKHR */)
      return 0;
  for (uint32_t i = 0; i < ci->stageCount; i++)
    if (ci->pStages[i].stage & (VK_SHADER_STAGE_MESH_BIT_EXT | VK_SHADER_STAGE_TASK_BIT_EXT))
      return 0;
  /* Discard leaves the fragment parts out of the pipeline. */
  if (ci->pRasterizationState && ci->pRasterizationState->rasterizerDiscardEnable)
    return 0;
  return 1;
}

VkResult pcache__fastlink_build(pcache_device *d, const pcache__build *b,
                                const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                                VkPipeline *ret_pipeline, pcache__fastlink_job **ret_job) {
  pcache__fastlink *fl = d->fastlink;
  part_info parts[PARTS];
  VkPipeline libraries[PARTS];
  pcache__build_source source;
  pcache_pending *claim = NULL;
  uint64_t k0, k1, v;
  int r, kept_here = 0, in_app_cache;
  uint32_t described = 0, found = 0;
  VkResult vr;

  *ret_job = NULL;
  vr = get_parts(d, b, parts, libraries, &described, &found);
  if (vr == VK_ERROR_FEATURE_NOT_PRESENT) {
    /* A part the describer cannot take (or no memory): the whole
     * pipeline, as without fast linking. */
    vr = pcache__build_hashed(d, b, keys, desc, ret_pipeline, &source);
    goto out;
  }
  if (vr != VK_SUCCESS)
    goto out;

  pcache__hash_keys(keys->state_hash.bytes, &k0, &k1);
  r = pcache__table_acquire(&d->built, k0, k1, &v, &claim);
  if (r == PCACHE__TABLE_FOUND) {
    /* The device cache holds the optimized pipeline: built here before. */
    vr = link(d, libraries, b->graphics->layout, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT,
              d->cache, ret_pipeline);
    goto out;
  }
  if (r != PCACHE__TABLE_CLAIMED)
    claim = NULL; /* a failed build we waited for, or no memory: no claim */
  atomic_fetch_add(&d->stats.misses, 1);
  if (pcache__build_from_daemon(d, b, keys, &in_app_cache)) {
    vr = link(d, libraries, b->graphics->layout, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT,
              d->cache, ret_pipeline);
    kept_here = 1;
  } else if (fl->mode == PCACHE_FAST_LINK_WAIT) {
    pcache__build_kept kept = {
        .kind = b->kind, .keys = keys, .desc = desc->data, .desc_size = desc->size};
    if (d->client)
      kept.n_modules = pcache__build_modules(d, b, kept.modules);
    vr = optimize(d, libraries, b->graphics->layout, &kept, ret_pipeline);
    kept_here = 1;
  } else {
    /* No link-time optimization, no cache: the link is the fast part. */
    vr = link(d, libraries, b->graphics->layout, 0, VK_NULL_HANDLE, ret_pipeline);
    if (vr == VK_SUCCESS) {
      atomic_fetch_add(&d->stats.fast_links, 1);
      if (found == PARTS)
        atomic_fetch_add(&d->stats.links_only, 1);
      *ret_job = job_new(d, b, libraries, keys, desc);
      if (*ret_job)
        (*ret_job)->linked_ns = pcache__mono_ns();
    }
  }
  /* Fast-linked, the state is not built until its job says so. */
  if (claim)
    pcache__table_complete(&d->built, claim, vr == VK_SUCCESS && kept_here ? 1 : 0, (int)vr);
out:
  for (uint32_t i = 0; i < described; i++)
    pcache__desc_buf_release(&parts[i].desc);
  return vr;
}

VkResult pcache__fastlink_prepare(pcache_device *d, const pcache__build *b) {
  part_info parts[PARTS];
  VkPipeline libraries[PARTS];
  uint32_t described = 0, found = 0;
  VkResult vr = get_parts(d, b, parts, libraries, &described, &found);
  for (uint32_t i = 0; i < described; i++)
    pcache__desc_buf_release(&parts[i].desc);
  if (vr == VK_SUCCESS)
    atomic_fetch_add(&d->stats.prepared, 1);
  return vr;
}

void pcache__fastlink_submit(pcache_device *d, pcache__fastlink_job *j, VkPipeline linked) {
  pcache__fastlink *fl = d->fastlink;
  if (!j)
    return;
  pthread_mutex_lock(&fl->lock);
  if (linked == VK_NULL_HANDLE || same_state(fl->queue, &j->keys) ||
      same_state(fl->running, &j->keys)) {
    pthread_mutex_unlock(&fl->lock);
    job_free(j);
    return;
  }
  j->linked = linked;
  j->linked_frame = fl->frame;
  *fl->queue_tail = j;
  fl->queue_tail = &j->next;
  pthread_cond_signal(&fl->work);
  pthread_mutex_unlock(&fl->lock);
}

static void count_swap(pcache_device *d, const pcache__fastlink_job *j, uint64_t now,
                       uint64_t frame) {
  uint64_t ns = now - j->linked_ns;
  atomic_fetch_add(&d->stats.swaps, 1);
  atomic_fetch_add(&d->stats.swap_ns_total, ns);
  atomic_fetch_add(&d->stats.swap_frames_total, frame - j->linked_frame);
  /* Only end_frame writes it, from one thread at a time. */
  if (ns > atomic_load(&d->stats.swap_ns_max))
    atomic_store(&d->stats.swap_ns_max, ns);
}

void pcache__fastlink_end_frame(pcache_device *d) {
  pcache__fastlink *fl = d->fastlink;
  pcache__fastlink_job *done;
  uint64_t frame, now;
  if (!fl)
    return;
  pthread_mutex_lock(&fl->lock);
  done = fl->done;
  fl->done = NULL;
  frame = ++fl->frame;
  fl->budget = fl->per_frame;
  pthread_cond_broadcast(&fl->work);
  pthread_mutex_unlock(&fl->lock);
  now = pcache__mono_ns();
  while (done) {
    pcache__fastlink_job *j = done;
    done = j->next;
    /* Released meanwhile (or no memory to swap): nobody wants it in the
     * tiers; its data is in the device cache all the same. */
    if (pcache__owned_swap(d, j->linked, j->optimized) == 0)
      count_swap(d, j, now, frame);
    else
      d->DestroyPipeline(d->vk_device, j->optimized, d->allocator);
    job_free(j);
  }
}

void pcache__fastlink_wait(pcache_device *d) {
  pcache__fastlink *fl = d->fastlink;
  if (!fl)
    return;
  pthread_mutex_lock(&fl->lock);
  while (fl->running || (fl->queue && fl->budget && fl->n_threads))
    pthread_cond_wait(&fl->idle, &fl->lock);
  pthread_mutex_unlock(&fl->lock);
}

static int uses_layout(const pcache__fastlink_job *j, VkPipelineLayout layout) {
  for (; j; j = j->next)
    if (j->layout == layout)
      return 1;
  return 0;
}

void pcache__fastlink_forget_layout(pcache_device *d, VkPipelineLayout layout) {
  pcache__fastlink *fl = d->fastlink;
  pcache__fastlink_job **pp, *dropped = NULL;
  if (!fl)
    return;
  pthread_mutex_lock(&fl->lock);
  pp = &fl->queue;
  fl->queue_tail = &fl->queue;
  while (*pp) {
    pcache__fastlink_job *j = *pp;
    if (j->layout == layout) {
      *pp = j->next;
      j->next = dropped;
      dropped = j;
      continue;
    }
    fl->queue_tail = &j->next;
    pp = &j->next;
  }
  while (uses_layout(fl->running, layout))
    pthread_cond_wait(&fl->idle, &fl->lock);
  pthread_mutex_unlock(&fl->lock);
  while (dropped) {
    pcache__fastlink_job *j = dropped;
    dropped = j->next;
    job_free(j);
  }
}

static void free_jobs(pcache_device *d, pcache__fastlink_job *j) {
  while (j) {
    pcache__fastlink_job *next = j->next;
    if (j->optimized != VK_NULL_HANDLE)
      d->DestroyPipeline(d->vk_device, j->optimized, d->allocator);
    job_free(j);
    j = next;
  }
}

void pcache__fastlink_stop(pcache_device *d) {
  pcache__fastlink *fl = d->fastlink;
  if (!fl)
    return;
  pthread_mutex_lock(&fl->lock);
  fl->stop = 1;
  pthread_cond_broadcast(&fl->work);
  pthread_mutex_unlock(&fl->lock);
  for (size_t i = 0; i < fl->n_threads; i++)
    pthread_join(fl->threads[i], NULL);
  free_jobs(d, fl->queue);
  free_jobs(d, fl->done);
  pcache__table_fini(&fl->parts, free_library, d);
  pthread_cond_destroy(&fl->idle);
  pthread_cond_destroy(&fl->work);
  pthread_mutex_destroy(&fl->lock);
  pcache__free(fl);
  d->fastlink = NULL;
}
