/* Graphics and compute pipelines through the client core, one create info
 * at a time, and the app's own pipeline caches.
 *
 * Each create info is described and hashed; a hashable one is built by the
 * core (build.c: the daemon's verified blob, what this process already
 * built, or a compile whose blob is uploaded). The pipeline is the app's:
 * the layer keeps no reference to it. Anything the layer cannot describe,
 * and any failure of the layer's own, goes to the driver exactly as the app
 * asked, with the app's cache.
 *
 * The app's cache: when the app passes one, it receives each of its
 * pipelines' entries (so what it saves still holds its pipelines) and
 * nothing else; when it passes none, the device cache the daemon seeded
 * serves. Merging into an app cache needs the cache externally
 * synchronized, which the app cannot know to do, so every use of an app
 * cache the layer makes or passes on holds the cache's lock: the read side
 * to create pipelines or read its data, the write side to merge into it. */
#include <stdlib.h>
#include <string.h>

#include "client/build.h"
#include "common/alloc.h"
#include "layer/layer.h"

static layer_device *device_of(VkDevice device) { return layer_registry_device(layer_key(device)); }

/* One create info, graphics or compute. */
typedef struct one_pipeline {
  uint32_t kind; /* Pcachepb__EntryKind */
  const VkGraphicsPipelineCreateInfo *graphics;
  const VkComputePipelineCreateInfo *compute;
} one_pipeline;

/* The driver, as the app asked (one create info of its batch). */
static VkResult pass_through(layer_device *ld, VkPipelineCache cache, layer_cache *app,
                             const one_pipeline *p, const VkAllocationCallbacks *allocator,
                             VkPipeline *ret_pipeline) {
  VkResult vr;
  if (app)
    pthread_rwlock_rdlock(&app->lock);
  vr = p->graphics
           ? ld->CreateGraphicsPipelines(ld->device, cache, 1, p->graphics, allocator, ret_pipeline)
           : ld->CreateComputePipelines(ld->device, cache, 1, p->compute, allocator, ret_pipeline);
  if (app)
    pthread_rwlock_unlock(&app->lock);
  return vr;
}

/* build.h's app_cache_defer: the entry waits for the app to read its
 * cache. Out of memory, the app cache goes without it, as when the daemon
 * is away. */
static void defer_entry(void *ctx, const pcache__hash *state_hash) {
  layer_cache *app = ctx;
  pthread_mutex_lock(&app->pending_lock);
  (void)pcache_vec_push(&app->pending, *state_hash);
  pthread_mutex_unlock(&app->pending_lock);
}

static int by_hash(const void *a, const void *b) {
  return memcmp(((const pcache__hash *)a)->bytes, ((const pcache__hash *)b)->bytes,
                PCACHE_HASH_SIZE);
}

/* Gives an app cache the entries deferred for it, before the app reads it.
 * Entries deferred meanwhile by other threads wait for the next read. */
static void fill_app_cache(layer_device *ld, layer_cache *app) {
  PCACHE_VEC(pcache__hash) todo = {0};
  size_t n = 0;
  uint8_t *got;
  pthread_mutex_lock(&app->pending_lock);
  todo.items = app->pending.items;
  todo.n = app->pending.n;
  todo.cap = app->pending.cap;
  app->pending.items = NULL;
  app->pending.n = app->pending.cap = 0;
  pthread_mutex_unlock(&app->pending_lock);
  if (todo.n == 0 || !ld->pc)
    goto out;
  /* One request per hash however often the app made the pipeline. */
  qsort(todo.items, todo.n, sizeof *todo.items, by_hash);
  for (size_t i = 0; i < todo.n; i++)
    if (n == 0 || !pcache__hash_equal(&todo.items[n - 1], &todo.items[i]))
      todo.items[n++] = todo.items[i];
  got = pcache__malloc(n);
  if (!got)
    goto out;
  atomic_fetch_add(&ld->stats.app_cache_entries,
                   pcache__build_fill_app_cache(ld->pc, app->handle, &app->lock, todo.items, n,
                                                got));
  for (size_t i = 0; i < n; i++) {
    uint64_t k0, k1;
    pcache__hash_keys(todo.items[i].bytes, &k0, &k1);
    if (got[i])
      (void)pcache__table_insert(&app->received, k0, k1, 1); /* out of memory: merged again */
  }
  pcache__free(got);
out:
  pcache_vec_free(&todo);
}

static VkResult create_one(layer_device *ld, VkPipelineCache cache, layer_cache *app,
                           const one_pipeline *p, const VkAllocationCallbacks *allocator,
                           VkPipeline *ret_pipeline) {
  pcache__build b = {.kind = p->kind,
                     .graphics = p->graphics,
                     .compute = p->compute,
                     .allocator = allocator,
                     .app_cache = app ? app->handle : VK_NULL_HANDLE,
                     .app_cache_lock = app ? &app->lock : NULL};
  pcache__build_source source;
  pcache__desc_buf buf;
  pcache__desc_keys keys;
  VkResult vr;
  int r;

  atomic_fetch_add(&ld->stats.pipelines, 1);
  /* No core context, or a cache the layer never saw made (it could not
   * allocate its record): the driver alone. */
  if (!ld->pc || (cache != VK_NULL_HANDLE && !app)) {
    atomic_fetch_add(&ld->stats.passed_through, 1);
    return pass_through(ld, cache, app, p, allocator, ret_pipeline);
  }
  /* Driver first, before anything is described: a pipeline the driver's
   * own caches hold then costs the program what it costs without the
   * layer. */
  if (pcache__build_probe_first(ld->pc, &b, ret_pipeline)) {
    atomic_fetch_add(&ld->stats.driver_hits, 1);
    return VK_SUCCESS;
  }
  pcache__desc_buf_init(&buf);
  r = pcache__build_describe(ld->pc, &b, &buf, &keys);
  if (r == PCACHE_EUNHASHABLE) {
    atomic_fetch_add(&ld->stats.unhashable, 1);
    layer_stats_unhashable(&ld->stats, buf.unhashable_reason ? buf.unhashable_reason : "unknown",
                           buf.unhashable_stype);
    vr = pass_through(ld, cache, app, p, allocator, ret_pipeline);
  } else if (r < 0) {
    atomic_fetch_add(&ld->stats.passed_through, 1);
    vr = pass_through(ld, cache, app, p, allocator, ret_pipeline);
  } else {
    uint64_t k0, k1;
    int got = 0;
    pcache__hash_keys(keys.state_hash.bytes, &k0, &k1);
    /* A pipeline this cache already received needs no Get and no merge;
     * one the device cache holds gets its entry when the app reads it. */
    b.app_cache_has = app && pcache__table_peek(&app->received, k0, k1) != 0;
    b.app_cache_got = &got;
    b.app_cache_defer = app ? defer_entry : NULL;
    b.app_cache_defer_ctx = app;
    atomic_fetch_add(&ld->stats.hashable, 1);
    vr = pcache__build_hashed(ld->pc, &b, &keys, &buf, ret_pipeline, &source);
    if (vr == VK_SUCCESS && app && got) {
      (void)pcache__table_insert(&app->received, k0, k1, 1); /* out of memory: merged again */
      atomic_fetch_add(&ld->stats.app_cache_entries, 1);
    }
    if (vr == VK_SUCCESS) {
      if (source == PCACHE__BUILT_DAEMON)
        atomic_fetch_add(&ld->stats.daemon_hits, 1);
      else if (source == PCACHE__BUILT_LOCAL)
        atomic_fetch_add(&ld->stats.local_hits, 1);
      else if (source == PCACHE__BUILT_COMPILED)
        atomic_fetch_add(&ld->stats.compiles, 1);
      else if (source == PCACHE__BUILT_DRIVER)
        atomic_fetch_add(&ld->stats.driver_hits, 1);
    }
  }
  pcache__desc_buf_release(&buf);
  return vr;
}

/* Folds one create info's result into the batch's: an error outranks
 * VK_PIPELINE_COMPILE_REQUIRED, which outranks success. */
static VkResult batch_result(VkResult so_far, VkResult one) {
  if (one == VK_SUCCESS)
    return so_far;
  if (so_far == VK_SUCCESS || (one < 0 && so_far > 0))
    return one;
  return so_far;
}

/* A batch, one create info at a time. A derivative naming its base by
 * index into the batch names it by handle instead, since the base was
 * created by an earlier call. */
#define CREATE_BATCH(Info, kind_value, field)                                                      \
  do {                                                                                             \
    layer_device *ld = device_of(device);                                                          \
    layer_cache *app = cache != VK_NULL_HANDLE ? layer_registry_cache(ld->key, cache) : NULL;      \
    VkResult result = VK_SUCCESS;                                                                  \
    for (uint32_t i = 0; i < count; i++) {                                                         \
      Info ci = infos[i];                                                                          \
      one_pipeline p = {.kind = (kind_value), .field = &ci};                                       \
      int in_flags2;                                                                               \
      uint64_t flags = pcache__pipeline_flags(ci.pNext, ci.flags, &in_flags2);                     \
      VkResult vr;                                                                                 \
      if ((flags & VK_PIPELINE_CREATE_DERIVATIVE_BIT) && ci.basePipelineIndex >= 0 &&              \
          (uint32_t)ci.basePipelineIndex < i) {                                                    \
        ci.basePipelineHandle = ret_pipelines[ci.basePipelineIndex];                               \
        ci.basePipelineIndex = -1;                                                                 \
        /* Its base failed: a derivative is only a hint, so it is built as a                       \
         * pipeline of its own rather than name a base that does not exist. */                     \
        if (ci.basePipelineHandle == VK_NULL_HANDLE && !in_flags2)                                 \
          ci.flags &= ~(VkPipelineCreateFlags)VK_PIPELINE_CREATE_DERIVATIVE_BIT;                   \
      }                                                                                            \
      ret_pipelines[i] = VK_NULL_HANDLE;                                                           \
      vr = create_one(ld, cache, app, &p, allocator, &ret_pipelines[i]);                           \
      if (vr != VK_SUCCESS) {                                                                      \
        ret_pipelines[i] = VK_NULL_HANDLE;                                                         \
        result = batch_result(result, vr);                                                         \
        if (flags & VK_PIPELINE_CREATE_EARLY_RETURN_ON_FAILURE_BIT) {                              \
          for (uint32_t j = i + 1; j < count; j++)                                                 \
            ret_pipelines[j] = VK_NULL_HANDLE;                                                     \
          break;                                                                                   \
        }                                                                                          \
      }                                                                                            \
    }                                                                                              \
    return result;                                                                                 \
  } while (0)

static VKAPI_ATTR VkResult VKAPI_CALL
layer_CreateGraphicsPipelines(VkDevice device, VkPipelineCache cache, uint32_t count,
                              const VkGraphicsPipelineCreateInfo *infos,
                              const VkAllocationCallbacks *allocator, VkPipeline *ret_pipelines) {
  CREATE_BATCH(VkGraphicsPipelineCreateInfo, PCACHEPB__ENTRY_KIND__ENTRY_KIND_GRAPHICS, graphics);
}

static VKAPI_ATTR VkResult VKAPI_CALL
layer_CreateComputePipelines(VkDevice device, VkPipelineCache cache, uint32_t count,
                             const VkComputePipelineCreateInfo *infos,
                             const VkAllocationCallbacks *allocator, VkPipeline *ret_pipelines) {
  CREATE_BATCH(VkComputePipelineCreateInfo, PCACHEPB__ENTRY_KIND__ENTRY_KIND_COMPUTE, compute);
}

/* ---------------------------------------------------------- app caches */

static VKAPI_ATTR VkResult VKAPI_CALL
layer_CreatePipelineCache(VkDevice device, const VkPipelineCacheCreateInfo *info,
                          const VkAllocationCallbacks *allocator, VkPipelineCache *ret_cache) {
  layer_device *ld = device_of(device);
  layer_cache *app;
  VkResult vr = ld->CreatePipelineCache(device, info, allocator, ret_cache);
  if (vr != VK_SUCCESS)
    return vr;
  /* Without a record the cache still works; pipelines made with it go to
   * the driver alone. */
  app = pcache__calloc(1, sizeof *app);
  if (!app)
    return vr;
  app->device_key = ld->key;
  app->handle = *ret_cache;
  if (pcache__cache_lock_init(&app->lock) != 0) {
    pcache__free(app);
    return vr;
  }
  if (pthread_mutex_init(&app->pending_lock, NULL) != 0) {
    pthread_rwlock_destroy(&app->lock);
    pcache__free(app);
    return vr;
  }
  if (pcache__table_init(&app->received) < 0) {
    pthread_mutex_destroy(&app->pending_lock);
    pthread_rwlock_destroy(&app->lock);
    pcache__free(app);
    return vr;
  }
  if (layer_registry_add_cache(app) < 0)
    layer_cache_free(app);
  return vr;
}

static VKAPI_ATTR void VKAPI_CALL layer_DestroyPipelineCache(
    VkDevice device, VkPipelineCache cache, const VkAllocationCallbacks *allocator) {
  layer_device *ld = device_of(device);
  layer_cache *app = cache != VK_NULL_HANDLE ? layer_registry_remove_cache(ld->key, cache) : NULL;
  ld->DestroyPipelineCache(device, cache, allocator);
  if (app)
    layer_cache_free(app);
}

static VKAPI_ATTR VkResult VKAPI_CALL layer_GetPipelineCacheData(VkDevice device,
                                                                 VkPipelineCache cache,
                                                                 size_t *size, void *data) {
  layer_device *ld = device_of(device);
  layer_cache *app = layer_registry_cache(ld->key, cache);
  VkResult vr;
  if (app) {
    fill_app_cache(ld, app);
    pthread_rwlock_rdlock(&app->lock);
  }
  vr = ld->GetPipelineCacheData(device, cache, size, data);
  if (app)
    pthread_rwlock_unlock(&app->lock);
  return vr;
}

static int by_handle(const void *a, const void *b) {
  const layer_cache *x = *(layer_cache *const *)a, *y = *(layer_cache *const *)b;
  uint64_t hx = PCACHE_HANDLE_U64(x->handle), hy = PCACHE_HANDLE_U64(y->handle);
  return hx < hy ? -1 : hx > hy;
}

/* The app's merge: its destination is written, its sources read, and the
 * layer may be merging into any of them for a pipeline another thread
 * creates. Locks are taken in handle order, so two merges in opposite
 * directions cannot deadlock. */
static VKAPI_ATTR VkResult VKAPI_CALL layer_MergePipelineCaches(VkDevice device,
                                                                VkPipelineCache dst, uint32_t n_src,
                                                                const VkPipelineCache *srcs) {
  layer_device *ld = device_of(device);
  layer_cache *stack[17];
  layer_cache **held = n_src < 17 ? stack : pcache__calloc((size_t)n_src + 1, sizeof *held);
  layer_cache *dst_app = layer_registry_cache(ld->key, dst);
  size_t n = 0;
  VkResult vr;
  /* What the merge reads must be complete: the sources' deferred entries. */
  for (uint32_t i = 0; i < n_src; i++) {
    layer_cache *src = layer_registry_cache(ld->key, srcs[i]);
    if (src)
      fill_app_cache(ld, src);
  }
  /* Out of memory for the lock list: the program's merge still happens,
   * unlocked against the layer's, rather than fail for want of ours. */
  if (!held)
    return ld->MergePipelineCaches(device, dst, n_src, srcs);
  if (dst_app)
    held[n++] = dst_app;
  for (uint32_t i = 0; i < n_src; i++) {
    layer_cache *app = layer_registry_cache(ld->key, srcs[i]);
    int dup = 0;

    for (size_t j = 0; j < n && app; j++)
      dup |= held[j] == app;
    if (app && !dup)
      held[n++] = app;
  }
  qsort(held, n, sizeof *held, by_handle);
  for (size_t i = 0; i < n; i++) {
    if (held[i] == dst_app)
      pthread_rwlock_wrlock(&held[i]->lock);
    else
      pthread_rwlock_rdlock(&held[i]->lock);
  }
  vr = ld->MergePipelineCaches(device, dst, n_src, srcs);
  for (size_t i = n; i-- > 0;)
    pthread_rwlock_unlock(&held[i]->lock);
  if (held != stack)
    pcache__free(held);
  return vr;
}

PFN_vkVoidFunction layer_pipelines_proc(const char *name) {
  static const layer_proc table[] = {
      LAYER_PROC(CreateGraphicsPipelines), LAYER_PROC(CreateComputePipelines),
      LAYER_PROC(CreatePipelineCache),     LAYER_PROC(DestroyPipelineCache),
      LAYER_PROC(GetPipelineCacheData),    LAYER_PROC(MergePipelineCaches),
  };
  return layer_find_proc(table, sizeof table / sizeof table[0], name);
}
