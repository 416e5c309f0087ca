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

#include "client/device.h"
#include "client/fastlink.h"
#include "client/fastlink_parts.h"
#include "client/owned.h"
#include "common/alloc.h"
#include "common/clock.h"

#define MAX_THREADS 8
#define DEFAULT_PER_FRAME 4

struct pcache__fastlink_job {
  pcache__fastlink_job *next;
  VkPipeline libraries[PCACHE__FASTLINK_PARTS]; /* the context's (parts table) */
  VkPipelineLayout layout;                      /* the app's: see pcache__fastlink_forget_layout */
  pcache__desc_keys keys;                       /* the complete pipeline's */
  pcache__build_kept kept;                      /* points at keys and the copied description */
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

/* --------------------------------------------------------------- the jobs */

static void job_free(pcache__fastlink_job *j) {
  for (size_t i = 0; i < j->kept.n_modules; i++)
    pcache__module_unref(j->kept.modules[i]);
  pcache__free((void *)j->kept.desc);
  pcache__free(j);
}

static pcache__fastlink_job *job_new(pcache_device *d, const pcache__build *b,
                                     const VkPipeline libraries[PCACHE__FASTLINK_PARTS],
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
  if (d->core.client) /* the code travels with the upload */
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

    vr = pcache__fastlink_optimize(d, j->libraries, j->layout, &j->kept, &j->optimized);
    if (vr == VK_SUCCESS) {
      uint64_t k0, k1;
      atomic_fetch_add(&d->core.stats.optimized, 1);
      /* The device cache holds it now: later misses link it from there. */
      pcache__hash_keys(j->keys.state_hash.bytes, &k0, &k1);
      (void)pcache__table_insert(&d->build.built, k0, k1, 1);
      if (d->core.ownership == PCACHE_PIPELINES_APP) {
        /* The app's handles are its own: nothing to swap. */
        d->core.DestroyPipeline(d->core.vk_device, j->optimized, d->core.allocator);
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
      (PFN_vkGetPhysicalDeviceFeatures2)gipa(d->core.instance, "vkGetPhysicalDeviceFeatures2");
  PFN_vkGetPhysicalDeviceProperties2 props2 =
      (PFN_vkGetPhysicalDeviceProperties2)gipa(d->core.instance, "vkGetPhysicalDeviceProperties2");
  VkPhysicalDeviceGraphicsPipelineLibraryFeaturesEXT gpl_features = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_FEATURES_EXT};
  VkPhysicalDeviceFeatures2 f = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_FEATURES_2,
                                 .pNext = &gpl_features};
  VkPhysicalDeviceGraphicsPipelineLibraryPropertiesEXT gpl_props = {
      .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_GRAPHICS_PIPELINE_LIBRARY_PROPERTIES_EXT};
  VkPhysicalDeviceProperties2 p = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                   .pNext = &gpl_props};
  if (d->core.instance_api_version < VK_API_VERSION_1_1 || !features2 || !props2)
    return 0;
  features2(d->core.physical_device, &f);
  props2(d->core.physical_device, &p);
  return gpl_features.graphicsPipelineLibrary &&
         (mode != PCACHE_FAST_LINK_THEN_OPTIMIZE || gpl_props.graphicsPipelineLibraryFastLinking);
}

void pcache__fastlink_start(pcache_device *d, const pcache_device_info *info,
                            PFN_vkGetInstanceProcAddr gipa) {
  pcache__fastlink *fl;
  size_t want;
  if (info->fast_link == PCACHE_FAST_LINK_NEVER || d->core.passthrough)
    return;
  if (!supported(d, info->fast_link, gipa)) {
    pcache__log(d->core.log, PCACHE_SEVERITY_INFO,
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
  pcache__log(d->core.log, PCACHE_SEVERITY_WARNING,
              "fast_link: out of memory or threads: misses compile in the caller's thread");
}

int pcache__fastlink_applies(const pcache_device *d, const pcache__build *b) {
  const VkGraphicsPipelineCreateInfo *ci = b->graphics;
  if (!d->fastlink || !ci || ci->flags != 0 || ci->stageCount > PCACHE__FASTLINK_MAX_STAGES ||
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
  pcache__fastlink_part parts[PCACHE__FASTLINK_PARTS];
  VkPipeline libraries[PCACHE__FASTLINK_PARTS];
  pcache__build_source source;
  pcache_pending *claim = NULL;
  uint64_t k0, k1, v;
  int r, kept_here = 0, in_app_cache;
  uint32_t described = 0, found = 0;
  VkResult vr;

  *ret_job = NULL;
  vr = pcache__fastlink_get_parts(d, &d->fastlink->parts, b, parts, libraries, &described, &found);
  if (vr == VK_ERROR_FEATURE_NOT_PRESENT) {
    /* A part the describer cannot take (or no memory): the whole
     * pipeline, as without fast linking. */
    vr = pcache__build_hashed(d, b, keys, desc, ret_pipeline, &source);
    goto out;
  }
  if (vr != VK_SUCCESS)
    goto out;

  pcache__hash_keys(keys->state_hash.bytes, &k0, &k1);
  r = pcache__table_acquire(&d->build.built, k0, k1, &v, &claim);
  if (r == PCACHE__TABLE_FOUND) {
    /* The device cache holds the optimized pipeline: built here before. */
    vr = pcache__fastlink_link(d, libraries, b->graphics->layout,
                               VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT, d->core.cache,
                               ret_pipeline);
    goto out;
  }
  if (r != PCACHE__TABLE_CLAIMED)
    claim = NULL; /* a failed build we waited for, or no memory: no claim */
  atomic_fetch_add(&d->core.stats.misses, 1);
  if (pcache__build_from_daemon(d, b, keys, &in_app_cache)) {
    vr = pcache__fastlink_link(d, libraries, b->graphics->layout,
                               VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT, d->core.cache,
                               ret_pipeline);
    kept_here = 1;
  } else if (fl->mode == PCACHE_FAST_LINK_WAIT) {
    pcache__build_kept kept = {
        .kind = b->kind, .keys = keys, .desc = desc->data, .desc_size = desc->size};
    if (d->core.client)
      kept.n_modules = pcache__build_modules(d, b, kept.modules);
    vr = pcache__fastlink_optimize(d, libraries, b->graphics->layout, &kept, ret_pipeline);
    kept_here = 1;
  } else {
    /* No link-time optimization, no cache: the link is the fast part. */
    vr = pcache__fastlink_link(d, libraries, b->graphics->layout, 0, VK_NULL_HANDLE, ret_pipeline);
    if (vr == VK_SUCCESS) {
      atomic_fetch_add(&d->core.stats.fast_links, 1);
      if (found == PCACHE__FASTLINK_PARTS)
        atomic_fetch_add(&d->core.stats.links_only, 1);
      *ret_job = job_new(d, b, libraries, keys, desc);
      if (*ret_job)
        (*ret_job)->linked_ns = pcache__mono_ns();
    }
  }
  /* Fast-linked, the state is not built until its job says so. */
  if (claim)
    pcache__table_complete(&d->build.built, claim, vr == VK_SUCCESS && kept_here ? 1 : 0, (int)vr);
out:
  for (uint32_t i = 0; i < described; i++)
    pcache__desc_buf_release(&parts[i].desc);
  return vr;
}

VkResult pcache__fastlink_prepare(pcache_device *d, const pcache__build *b) {
  pcache__fastlink_part parts[PCACHE__FASTLINK_PARTS];
  VkPipeline libraries[PCACHE__FASTLINK_PARTS];
  uint32_t described = 0, found = 0;
  VkResult vr =
      pcache__fastlink_get_parts(d, &d->fastlink->parts, b, parts, libraries, &described, &found);
  for (uint32_t i = 0; i < described; i++)
    pcache__desc_buf_release(&parts[i].desc);
  if (vr == VK_SUCCESS)
    atomic_fetch_add(&d->core.stats.prepared, 1);
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
  atomic_fetch_add(&d->core.stats.swaps, 1);
  atomic_fetch_add(&d->core.stats.swap_ns_total, ns);
  atomic_fetch_add(&d->core.stats.swap_frames_total, frame - j->linked_frame);
  /* Only end_frame writes it, from one thread at a time. */
  if (ns > atomic_load(&d->core.stats.swap_ns_max))
    atomic_store(&d->core.stats.swap_ns_max, ns);
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
    if (pcache__owned_swap(&d->owned, j->linked, j->optimized) == 0)
      count_swap(d, j, now, frame);
    else
      d->core.DestroyPipeline(d->core.vk_device, j->optimized, d->core.allocator);
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
      d->core.DestroyPipeline(d->core.vk_device, j->optimized, d->core.allocator);
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
  pcache__table_fini(&fl->parts, pcache__fastlink_free_library, d);
  pthread_cond_destroy(&fl->idle);
  pthread_cond_destroy(&fl->work);
  pthread_mutex_destroy(&fl->lock);
  pcache__free(fl);
  d->fastlink = NULL;
}
