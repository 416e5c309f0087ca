/* Building one pipeline, its creation and compile paths (build.h;
 * build_internal.h says how this file and build.c share the work):
 * creating a pipeline through a cache (with creation feedback), through
 * the app cache or the device cache, as the program would; the compile of
 * a miss nobody could serve, with a fresh cache of its own that is kept
 * (merged, uploaded: pcache__build_keep); binary mode's compile that
 * captures the pipeline's binaries; and staging (build.h, "Staging"): a
 * miss compiled as the program would, or a driver hit, whose description
 * goes up for the daemon's replayer to build. */
#include <errno.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>

#include "client/binary.h"
#include "client/build_internal.h"
#include "client/device.h"
#include "client/log.h"
#include "client/prefetch.h"
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
VkResult pcache__build_create(pcache_device *d, const pcache__build *b, VkPipelineCache cache,
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
VkResult pcache__build_create_cached(pcache_device *d, const pcache__build *b, int in_app_cache,
                                     VkPipeline *ret_pipeline) {
  VkResult vr;
  if (in_app_cache) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = pcache__build_create(d, b, b->app_cache, 0, NULL, ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
    return vr;
  }
  pthread_rwlock_rdlock(&d->core.cache_lock);
  vr = pcache__build_create(d, b, d->core.cache, 0, NULL, ret_pipeline);
  pthread_rwlock_unlock(&d->core.cache_lock);
  return vr;
}

/* Gives the app cache one pipeline's entry. 1 when it has it. */
int pcache__build_merge_app_cache(pcache_device *d, const pcache__build *b, VkPipelineCache src) {
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
  /* Binary mode stages nothing: its capture costs about 1% of the
   * compile (compile_binary), so leaving the build to the replayer saves
   * the program nothing. Whether the daemon builds staged pipelines (its
   * Hello's stages) is asked where each is staged: a driver-first
   * device's Hello may still be unanswered here (client.c). */
  if (!d->core.client || d->core.binary || d->core.passthrough || (env && strcmp(env, "off") == 0))
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
  if (!d->build.stage_hits || !pcache__client_stages(d->core.client) ||
      pcache__segment_known(d, &keys->state_hash))
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
  int r;
  /* No pipeline cache, not even the app's: capturing through one is
   * invalid (VUID-vkCreateGraphicsPipelines-pNext-09617). The app's cache
   * then goes without this pipeline's entry; the driver's own disk cache
   * gets it as without pcache. */
  vr = pcache__build_create(d, b, VK_NULL_HANDLE, 0, (VkBaseOutStructure *)&f2, &pipeline);
  kept.compile_ns = pcache__mono_ns() - start;
  if (vr != VK_SUCCESS)
    return vr;
  atomic_fetch_add(&d->core.stats.compiles, 1);
  *ret_pipeline = pipeline;
  r = pcache__binary_capture(&d->core.bin_vk, &d->core.bin_key, pipeline, b->allocator, &blob,
                             &size);
  if (r == PCACHE_ECAPTURE && d->core.client) {
    /* The driver's doing, so said as pcache-replay's failed item says it
     * (replay/replay_vk.c); once, then its repeats counted (log.h). Not
     * on a device without a client: it stores nothing, either way. */
    static const char site[] = "binary_capture";
    pcache__log_limited(d->core.log, PCACHE_SEVERITY_WARNING, site, 0, 0,
                        "%s: this pipeline is not stored; %s", /* under 200 bytes (log.h) */
                        pcache_strerror(r), PCACHE__BINARY_CAPTURE_FIX);
  }
  if (r == 0 && d->core.client) {
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

/* The pipeline as the program would create it: its own cache, or none. */
VkResult pcache__build_as_program(pcache_device *d, const pcache__build *b,
                                  VkPipeline *ret_pipeline) {
  VkResult vr;
  if (b->app_cache != VK_NULL_HANDLE) {
    pthread_rwlock_rdlock(b->app_cache_lock);
    vr = pcache__build_create(d, b, b->app_cache, 0, NULL, ret_pipeline);
    pthread_rwlock_unlock(b->app_cache_lock);
    if (vr == VK_SUCCESS && b->app_cache_got)
      *b->app_cache_got = 1;
  } else {
    vr = pcache__build_create(d, b, VK_NULL_HANDLE, 0, NULL, ret_pipeline);
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
  VkResult vr = pcache__build_as_program(d, b, ret_pipeline);
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
VkResult pcache__build_compile(pcache_device *d, const pcache__build *b,
                               const pcache__desc_keys *keys, const pcache__desc_buf *desc,
                               VkPipeline *ret_pipeline, int *ret_held) {
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
    return pcache__build_create_cached(d, b, b->app_cache != VK_NULL_HANDLE, ret_pipeline);
  /* A chain with flags 2 of its own cannot carry the capture bit without
   * changing the app's struct: the VkPipelineCache path then, kept here. */
  if (d->core.binary && !in_flags2)
    return compile_binary(d, b, keys, desc, ret_pipeline);
  /* The daemon may have lost its replayer since creation (a restart
   * without one): its Hello says so. */
  if (d->build.stage_compiles && pcache__client_stages(d->core.client)) {
    *ret_held = BUILT_STAGED;
    return compile_staged(d, b, keys, desc, ret_pipeline);
  }
  if (d->core.CreatePipelineCache(d->core.vk_device, &ci, d->core.allocator, &fresh) != VK_SUCCESS)
    fresh = VK_NULL_HANDLE; /* still build it, just without a blob to share */
  start = pcache__mono_ns();
  vr = pcache__build_create(d, b, fresh, 0, NULL, &pipeline);
  kept.compile_ns = pcache__mono_ns() - start;
  if (vr != VK_SUCCESS)
    goto out_cache;
  atomic_fetch_add(&d->core.stats.compiles, 1);
  *ret_pipeline = pipeline;
  if (fresh == VK_NULL_HANDLE)
    goto out_cache;
  (void)pcache__build_merge_app_cache(d, b, fresh);
  kept.n_modules = d->core.client ? pcache__build_modules(d, b, kept.modules) : 0;
  pcache__build_keep(d, fresh, &kept);
out_cache:
  if (fresh != VK_NULL_HANDLE)
    d->core.DestroyPipelineCache(d->core.vk_device, fresh, d->core.allocator);
  return vr;
}
