/* The device context's life: resolving the driver's entry points,
 * identifying the device (the device key), creating the device cache and
 * seeding it from the daemon, flush, end of frame, statistics and destroy.
 * The work itself lives in the files named by the headers below. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "client/abi.h"
#include "client/appcache.h"
#include "client/binary.h"
#include "client/build.h"
#include "client/device.h"
#include "client/fastlink.h"
#include "client/owned.h"
#include "client/pipeline.h"
#include "client/prefetch.h"
#include "client/segment.h"
#include "client/upload.h"
#include "common/alloc.h"

static int resolve(pcache__core *d, PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa) {
  if (!gdpa)
    gdpa = (PFN_vkGetDeviceProcAddr)gipa(d->instance, "vkGetDeviceProcAddr");
  if (!gdpa)
    return -EINVAL;
#define DEV(name) d->name = (PFN_vk##name)gdpa(d->vk_device, "vk" #name)
  DEV(CreatePipelineCache);
  DEV(DestroyPipelineCache);
  DEV(GetPipelineCacheData);
  DEV(MergePipelineCaches);
  DEV(CreateGraphicsPipelines);
  DEV(CreateComputePipelines);
  DEV(DestroyPipeline);
  DEV(CreateShaderModule);
  DEV(DestroyShaderModule);
  DEV(CreateDescriptorSetLayout);
  DEV(DestroyDescriptorSetLayout);
  DEV(CreatePipelineLayout);
  DEV(DestroyPipelineLayout);
  DEV(CreateRenderPass);
  DEV(CreateRenderPass2);
  DEV(DestroyRenderPass);
  DEV(CreateSampler);
  DEV(DestroySampler);
#undef DEV
  if (!d->CreateRenderPass2)
    d->CreateRenderPass2 = (PFN_vkCreateRenderPass2)gdpa(d->vk_device, "vkCreateRenderPass2KHR");
  if (!d->CreatePipelineCache || !d->DestroyPipelineCache || !d->GetPipelineCacheData ||
      !d->MergePipelineCaches || !d->CreateGraphicsPipelines || !d->CreateComputePipelines ||
      !d->DestroyPipeline || !d->CreateShaderModule || !d->DestroyShaderModule ||
      !d->CreateDescriptorSetLayout || !d->DestroyDescriptorSetLayout || !d->CreatePipelineLayout ||
      !d->DestroyPipelineLayout || !d->CreateRenderPass || !d->DestroyRenderPass ||
      !d->CreateSampler || !d->DestroySampler)
    return -EINVAL;
  return 0;
}

static void identify(pcache__core *d, PFN_vkGetInstanceProcAddr gipa) {
  VkPhysicalDeviceProperties props;
  PFN_vkGetPhysicalDeviceProperties get_props =
      (PFN_vkGetPhysicalDeviceProperties)gipa(d->instance, "vkGetPhysicalDeviceProperties");
  PFN_vkGetPhysicalDeviceProperties2 get_props2 =
      (PFN_vkGetPhysicalDeviceProperties2)gipa(d->instance, "vkGetPhysicalDeviceProperties2");
  get_props(d->physical_device, &props);
  pcache__devkey_make(props.pipelineCacheUUID, props.vendorID, props.deviceID, props.driverVersion,
                      (uint32_t)sizeof(void *), &d->key);
  memcpy(d->device_name, props.deviceName, sizeof d->device_name);
  d->device_name[sizeof d->device_name - 1] = '\0';
  d->api_version = props.apiVersion;
  /* vkGetPhysicalDeviceProperties2 and VkPhysicalDeviceIDProperties are
   * core in 1.1, VkPhysicalDeviceDriverProperties in 1.2, and the app's
   * instance must have asked for that version too (the effective version
   * is the lower of the two: calling past it is a validation error the app
   * would see as its own). Through the KHR extensions a 1.0 instance could
   * answer as well, but only if the app enabled them, which the library
   * cannot see. The UUID and the names are only for display, so older
   * ones go without. */
  if (get_props2 && props.apiVersion >= VK_API_VERSION_1_1 &&
      d->instance_api_version >= VK_API_VERSION_1_1) {
    int v12 =
        props.apiVersion >= VK_API_VERSION_1_2 && d->instance_api_version >= VK_API_VERSION_1_2;
    VkPhysicalDeviceDriverProperties driver = {
        .sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_DRIVER_PROPERTIES};
    VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES,
                                       .pNext = v12 ? &driver : NULL};
    VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                          .pNext = &id};
    get_props2(d->physical_device, &props2);
    memcpy(d->device_uuid, id.deviceUUID, sizeof d->device_uuid);
    d->has_device_uuid = 1;
    if (v12) {
      d->driver_id = (uint32_t)driver.driverID;
      memcpy(d->driver_name, driver.driverName, sizeof d->driver_name);
      d->driver_name[sizeof d->driver_name - 1] = '\0';
      memcpy(d->driver_info, driver.driverInfo, sizeof d->driver_info);
      d->driver_info[sizeof d->driver_info - 1] = '\0';
    }
  }
}

int pcache__device_create(pcache_client *client, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa,
                          pcache_device **ret_device) {
  VkPipelineCacheCreateInfo cache_ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  pcache_device *d;
  int r = -ENOMEM;

  VkResult vr;

  if (!info->instance || !info->physical_device || !info->device || !gipa || !ret_device ||
      info->pipeline_ownership > PCACHE_PIPELINES_APP || info->fast_link > PCACHE_FAST_LINK_WAIT)
    return -EINVAL;
  d = pcache__calloc(1, sizeof *d);
  if (!d)
    return -ENOMEM;
  d->core.passthrough = info->passthrough != 0;
  d->core.ownership = info->pipeline_ownership;
  /* Pass-through talks to nobody and keeps nothing; neither does a device
   * of a forked child on its parent's client. */
  d->core.client = pcache__client_usable(client) && !d->core.passthrough ? client : NULL;
  d->core.log = pcache__client_logger(client);
  if (d->core.passthrough)
    d->core.given_cache = info->pipeline_cache;
  if (info->cache_path && !d->core.passthrough) {
    size_t n = strlen(info->cache_path) + 1;
    d->appcache.path = pcache__malloc(n);
    if (!d->appcache.path)
      goto out_free;
    memcpy(d->appcache.path, info->cache_path, n);
  }
  d->core.instance = info->instance;
  d->core.physical_device = info->physical_device;
  d->core.vk_device = info->device;
  if (info->allocator) {
    d->core.allocator_copy = *info->allocator;
    d->core.allocator = &d->core.allocator_copy;
  }
  d->core.creation_feedback = info->creation_feedback;
  d->core.instance_api_version = info->instance_api_version;
  {
    /* Driver first (build.c) needs the feature the app enabled; the
     * variable is for measuring pcache with and without it. */
    const char *env = getenv("PCACHE_DRIVER_FIRST");
    d->core.driver_first = info->cache_control && !(env && env[0] == '0');
  }
  if (resolve(&d->core, gipa, gdpa) < 0) {
    r = -EINVAL;
    goto out_free;
  }
  identify(&d->core, gipa);
  pcache__binary_setup(&d->core, info, gipa, gdpa);

  d->core.shards_mem = pcache__calloc(1, PCACHE__SHARDS * sizeof(pcache__shard) + 127);
  if (!d->core.shards_mem)
    goto out_free;
  d->core.shards = (pcache__shard *)(((uintptr_t)d->core.shards_mem + 127) & ~(uintptr_t)127);
  d->core.objects = pcache__objmap_new(d->core.shards);
  if (!d->core.objects)
    goto out_shards;
  d->core.lookup = pcache__objmap_lookup(d->core.objects);
  if (pcache__cache_lock_init(&d->core.cache_lock) != 0) {
    r = -ENOMEM;
    goto out_objects;
  }
  r = -ENOMEM;
  if (pthread_mutex_init(&d->tiers.lock, NULL) != 0)
    goto out_cache_lock;
  if (pthread_mutex_init(&d->owned.lock, NULL) != 0)
    goto out_tiers_lock;
  if (pcache__owned_init(&d->owned, &d->core) < 0)
    goto out_owned_lock;
  if (pthread_mutex_init(&d->appcache.lock, NULL) != 0)
    goto out_owned;
  if (pthread_mutex_init(&d->appcache.file_lock, NULL) != 0)
    goto out_app_cache_lock;
  if (pcache__table_init(&d->tiers.by_hash) < 0)
    goto out_cache_file_lock;
  if (pcache__table_init(&d->tiers.by_app) < 0)
    goto out_hash_tiers;
  if (pcache__table_init(&d->core.prefetched) < 0)
    goto out_app_tiers;
  if (pcache__table_init(&d->build.built) < 0) {
    pcache__table_fini(&d->core.prefetched, NULL, NULL);
    goto out_app_tiers;
  }
  if (pcache__table_init(&d->build.staged) < 0) {
    pcache__table_fini(&d->build.built, NULL, NULL);
    pcache__table_fini(&d->core.prefetched, NULL, NULL);
    goto out_app_tiers;
  }
  if (pthread_mutex_init(&d->snapshot.lock, NULL) != 0) {
    pcache__table_fini(&d->build.staged, NULL, NULL);
    pcache__table_fini(&d->build.built, NULL, NULL);
    pcache__table_fini(&d->core.prefetched, NULL, NULL);
    goto out_app_tiers;
  }
  /* Pass-through has no cache of its own: the driver gets the app's. */
  vr = d->core.passthrough ? VK_SUCCESS
                           : d->core.CreatePipelineCache(d->core.vk_device, &cache_ci,
                                                         d->core.allocator, &d->core.cache);
  if (vr != VK_SUCCESS) {
    pcache__device_info_set_result(info, vr);
    r = PCACHE_EVULKAN;
    goto out_prefetched;
  }
  if (d->core.client) {
    r = pcache__upload_start(d);
    if (r < 0)
      goto out_cache;
    const char *env = getenv("PCACHE_NO_SNAPSHOT");
    /* Binary mode has no prefetch, segment or snapshot: what they carry is
     * VkPipelineCache data, and the driver-first probe serves warm runs. */
    d->core.no_snapshot = (env && env[0] == '1') || d->core.binary;
    d->core.creating = 1;
    uint32_t offset = 0;
    int slow = 0, more = 0, prefetch = !d->core.binary && !pcache__prefetch_disabled(info);
    /* Only with the daemon there: one away would hold the upload thread
     * in retries at the first miss, its uploads behind them. */
    if (prefetch && pcache__client_reachable(d->core.client) && pcache__prefetch_in_background(d)) {
      /* The driver's own caches answer first: loading the prefetch here
       * would only make the program's start wait for what a warm start
       * never uses, and so would the segment's round trip. The upload
       * thread maps the segment now and does the prefetch once the driver
       * first misses (after creation, which ends with creating at 0). */
      more = 1;
      pcache__upload_prefetch_defer(d);
    } else {
      /* The segment first, prefetch or not: a miss looks there before it
       * asks the daemon. When it holds all a prefetch would bring, no
       * page is asked for. */
      slow = !d->core.binary && pcache__segment_fetch(d, d->core.client->timeout_ms) == -ETIMEDOUT;
      /* A daemon too slow for the segment is too slow for pages too: they
       * are all left to the upload thread, so creation waits one timeout. */
      if (prefetch && !pcache__segment_prefetch(d, &offset) &&
          (slow || pcache__prefetch_at_create(d, info, offset, &offset))) {
        /* From here the upload thread may fetch the first page: the app
         * may hold the cache by then, so a late snapshot is merged, not
         * swapped in. */
        more = 1;
        d->core.creating = 0;
        pcache__upload_prefetch_rest(d, offset);
      }
    }
    d->core.creating = 0;
    /* The daemon answered and had nothing of this (device, app): its first
     * run under pcache, whose driver hits are worth staging. */
    pcache__build_stage_policy(d, !slow && !more && !pcache__prefetch_disabled(info) &&
                                      atomic_load(&d->core.client->connected) &&
                                      atomic_load(&d->core.stats.prefetched) == 0 &&
                                      atomic_load(&d->core.stats.snapshot_loaded) == 0);
  }
  /* After the prefetch, which may have replaced the cache by a snapshot. */
  if (!d->core.passthrough)
    pcache__appcache_load(d, info->pipeline_cache);
  pcache__fastlink_start(d, info, gipa);
  pcache__device_info_set_result(info, VK_SUCCESS);
  *ret_device = d;
  return 0;

out_cache:
  d->core.DestroyPipelineCache(d->core.vk_device, d->core.cache, d->core.allocator);
out_prefetched:
  pthread_mutex_destroy(&d->snapshot.lock);
  pcache__table_fini(&d->build.staged, NULL, NULL);
  pcache__table_fini(&d->build.built, NULL, NULL);
  pcache__table_fini(&d->core.prefetched, NULL, NULL);
out_app_tiers:
  pcache__table_fini(&d->tiers.by_app, NULL, NULL);
out_hash_tiers:
  pcache__table_fini(&d->tiers.by_hash, NULL, NULL);
out_cache_file_lock:
  pthread_mutex_destroy(&d->appcache.file_lock);
out_app_cache_lock:
  pthread_mutex_destroy(&d->appcache.lock);
out_owned:
  pcache__owned_fini(&d->owned);
out_owned_lock:
  pthread_mutex_destroy(&d->owned.lock);
out_tiers_lock:
  pthread_mutex_destroy(&d->tiers.lock);
out_cache_lock:
  pthread_rwlock_destroy(&d->core.cache_lock);
out_objects:
  pcache__objmap_free(d->core.objects);
out_shards:
  pcache__free(d->core.shards_mem);
out_free:
  pcache__free(d->appcache.path);
  pcache__free(d);
  return r;
}

PCACHE_API void pcache_device_destroy(pcache_device *device) {
  if (!device)
    return;
  /* First: its threads compile and upload. */
  pcache__fastlink_stop(device);
  if (device->core.client) {
    /* Within the one flush timeout: a snapshot that cannot make it is
     * skipped (the next run that changes the cache uploads one). */
    pcache__upload_want_snapshot(device);
    pcache__upload_flush(device, device->core.client->timeout_ms);
    pcache__upload_stop(device);
  }
  /* Best effort: destroy has no way to report a failed save. */
  (void)pcache__appcache_save(device);
  pcache__pipeline_release_all(device);
  pcache__appcache_fini(device);
  pcache__segment_release(device);
  device->core.DestroyPipelineCache(device->core.vk_device, device->core.cache,
                                    device->core.allocator);
  pcache__table_fini(&device->core.prefetched, NULL, NULL);
  pcache__table_fini(&device->build.built, NULL, NULL);
  pcache__table_fini(&device->build.staged, NULL, NULL);
  pcache_vec_free(&device->snapshot.held);
  pthread_mutex_destroy(&device->snapshot.lock);
  pcache__objmap_free(device->core.objects);
  pcache__free(device->core.shards_mem);
  pthread_mutex_destroy(&device->owned.lock);
  pthread_mutex_destroy(&device->appcache.lock);
  pthread_mutex_destroy(&device->appcache.file_lock);
  pthread_mutex_destroy(&device->tiers.lock);
  pthread_rwlock_destroy(&device->core.cache_lock);
  pcache__free(device);
}

PCACHE_API VkPipelineCache pcache_device_pipeline_cache(const pcache_device *device) {
  if (!device)
    return VK_NULL_HANDLE;
  if (device->core.passthrough)
    return device->core.given_cache;
  /* Made on first use, so the pointer is const only to the app. */
  return pcache__appcache_get((pcache_device *)device);
}

PCACHE_API int pcache_device_flush(pcache_device *device) {
  int r = 0, saved;
  if (!device)
    return -EINVAL;
  /* Optimizations under way end in uploads: those first. */
  pcache__fastlink_wait(device);
  if (device->core.client) {
    pcache__upload_want_snapshot(device);
    r = pcache__upload_flush(device, device->core.client->timeout_ms);
  }
  saved = pcache__appcache_save(device);
  return r < 0 ? r : saved;
}

PCACHE_API int pcache_device_cache_file_status(const pcache_device *device) {
  return device ? device->appcache.file_status : -EINVAL;
}

PCACHE_API void pcache_device_end_frame(pcache_device *device) {
  if (!device)
    return;
  /* Before publishing: a swap may change entries about to be published. */
  pcache__fastlink_end_frame(device);
  pcache__pipeline_end_frame(device);
}

PCACHE_API int pcache_device_get_stats_sized(const pcache_device *device,
                                             pcache_stats *caller_stats, size_t stats_size) {
  pcache_device *d = (pcache_device *)device;
  pcache_stats stats, *ret_stats = &stats;
  if (!device || !caller_stats || stats_size < PCACHE__V1_SIZE(pcache_stats, snapshots_uploaded))
    return -EINVAL;
  ret_stats->hits_app_key = 0;
  ret_stats->hits_create_info = 0;
  for (size_t s = 0; s < PCACHE__SHARDS; s++) {
    ret_stats->hits_app_key +=
        atomic_load_explicit(&d->core.shards[s].hits_app_key, memory_order_relaxed);
    ret_stats->hits_create_info +=
        atomic_load_explicit(&d->core.shards[s].hits_create_info, memory_order_relaxed);
  }
  ret_stats->misses = atomic_load(&d->core.stats.misses);
  ret_stats->daemon_hits = atomic_load(&d->core.stats.daemon_hits);
  ret_stats->driver_cache_hits = atomic_load(&d->core.stats.driver_cache_hits);
  ret_stats->compiles = atomic_load(&d->core.stats.compiles);
  ret_stats->unhashable = atomic_load(&d->core.stats.unhashable);
  ret_stats->upload_queue = d->core.client ? pcache__upload_queue_len(d) : 0;
  ret_stats->uploaded = atomic_load(&d->core.stats.uploaded);
  ret_stats->prefetched = atomic_load(&d->core.stats.prefetched);
  ret_stats->rejected_blobs = atomic_load(&d->core.stats.rejected_blobs);
  ret_stats->pipelines_this_frame = atomic_load(&d->core.stats.pipelines_this_frame);
  ret_stats->pipelines = atomic_load(&d->core.stats.pipelines);
  ret_stats->snapshot_loaded = atomic_load(&d->core.stats.snapshot_loaded);
  ret_stats->snapshots_uploaded = atomic_load(&d->core.stats.snapshots_uploaded);
  /* The fields the caller compiled; newer ones stay the library's. */
  memcpy(caller_stats, &stats, stats_size < sizeof stats ? stats_size : sizeof stats);
  return 0;
}

/* The exported symbol for callers without the header (dlsym): the first
 * version's fields. The parentheses keep the header's macro out. */
PCACHE_API int(pcache_device_get_stats)(const pcache_device *device, pcache_stats *ret_stats) {
  return pcache_device_get_stats_sized(device, ret_stats,
                                       PCACHE__V1_SIZE(pcache_stats, snapshots_uploaded));
}

PCACHE_API int pcache_device_get_counters_sized(const pcache_device *device,
                                                pcache_counters *caller_counters, size_t size) {
  pcache_device *d = (pcache_device *)device;
  pcache_counters c;
  if (!device || !caller_counters || size < PCACHE__V1_SIZE(pcache_counters, cache_file_saved))
    return -EINVAL;
  c.released = atomic_load(&d->core.stats.released);
  c.reused_handles = atomic_load(&d->core.stats.reused_handles);
  c.cache_file_loaded = atomic_load(&d->core.stats.cache_file_loaded);
  c.cache_file_saved = atomic_load(&d->core.stats.cache_file_saved);
  c.fast_links = atomic_load(&d->core.stats.fast_links);
  c.optimized = atomic_load(&d->core.stats.optimized);
  c.swaps = atomic_load(&d->core.stats.swaps);
  c.swap_ns_total = atomic_load(&d->core.stats.swap_ns_total);
  c.swap_ns_max = atomic_load(&d->core.stats.swap_ns_max);
  c.swap_frames_total = atomic_load(&d->core.stats.swap_frames_total);
  c.parts_made = atomic_load(&d->core.stats.parts_made);
  c.links_only = atomic_load(&d->core.stats.links_only);
  c.prepared = atomic_load(&d->core.stats.prepared);
  c.upload_dropped = atomic_load(&d->core.stats.upload_dropped);
  c.driver_hits = atomic_load(&d->core.stats.driver_hits);
  c.staged = atomic_load(&d->core.stats.staged);
  memcpy(caller_counters, &c, size < sizeof c ? size : sizeof c);
  return 0;
}
