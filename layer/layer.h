/* VK_LAYER_PCACHE_pipeline_cache: what the layer's files share.
 *
 *   dispatch.c   the loader interface, instance and device creation, and
 *                which functions the layer intercepts
 *   registry.c   instances, devices and app pipeline caches by handle
 *   objects.c    objects a pipeline's description needs (recorded by
 *                content through the client core's record.c), and their
 *                destruction, pipeline libraries' included
 *   pipelines.c  graphics and compute pipelines, app pipeline caches
 *   stats.c      what the layer did: sent to the daemon, and printed on
 *                request, at vkDestroyDevice and at exit
 *
 * Everything pcache-specific (describing, hashing, the daemon, blob checks,
 * uploads) is the client core's, the same code libpcache runs. The layer
 * adds only the interception and the app's own caches. Any failure of its
 * own makes the call go to the driver as if the layer were not there. */
#ifndef PCACHE_LAYER_LAYER_H
#define PCACHE_LAYER_LAYER_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/types.h>
#include <vulkan/vk_layer.h>
#include <vulkan/vulkan.h>

#include "client/device.h"
#include "common/alloc.h"
#include "common/vec.h"

#define PCACHE_LAYER_NAME "VK_LAYER_PCACHE_pipeline_cache"

/* Why a pipeline could not be described, counted per (reason, sType). */
typedef struct layer_unhashable {
  const char *reason;
  uint32_t stype;
  uint64_t count;
} layer_unhashable;

#define LAYER_MAX_REASONS 32

typedef struct layer_stats {
  atomic_uint_fast64_t pipelines; /* create infos the app passed */
  atomic_uint_fast64_t hashable;  /* of those, described and hashed */
  atomic_uint_fast64_t daemon_hits, driver_hits, local_hits, compiles, unhashable, passed_through;
  atomic_uint_fast64_t app_cache_entries; /* entries the app's own caches received */
  pthread_mutex_t reasons_lock;
  layer_unhashable reasons[LAYER_MAX_REASONS];
  size_t n_reasons;
} layer_stats;

typedef struct layer_instance {
  void *key; /* the loader's dispatch key, shared by its physical devices */
  VkInstance instance;
  PFN_vkGetInstanceProcAddr next_gipa;
  PFN_vkDestroyInstance DestroyInstance;
  PFN_vkCreateDevice CreateDevice;
  uint32_t api_version;  /* what the app asked for (VkApplicationInfo), at least 1.0 */
  pcache_client *client; /* NULL: no daemon (disabled, or out of memory) */
  /* What opening it cost vkCreateInstance, until its first device's
   * setup_us takes it. */
  _Atomic uint64_t open_us;
} layer_instance;

/* Extensions the layer may add to a device's list: a copy of the
 * program's list with them appended (features.c). */
#define LAYER_MAX_EXTENSIONS 256

/* What layer_features_enable changed in a vkCreateDevice call (features.c). */
typedef struct layer_features {
  int enabled;          /* the device will have pipelineCreationCacheControl */
  int binary;           /* ... and VK_KHR_pipeline_binary with its feature */
  uint8_t copies[2048] __attribute__((aligned(16))); /* the program's structs, copied */
  size_t copied;
  VkPhysicalDevicePipelineCreationCacheControlFeatures feature; /* ours, prepended */
  VkPhysicalDevicePipelineBinaryFeaturesKHR binary_feature;     /* ours, prepended */
  VkPhysicalDeviceMaintenance5FeaturesKHR maintenance5_feature; /* ours, prepended */
  const char *extensions[LAYER_MAX_EXTENSIONS];
  VkDeviceCreateInfo ci; /* with them */
} layer_features;

/* The create info to pass down: ci itself, or a copy of it with the
 * features turned on (in copies of the program's structs that carry them,
 * or in ours, prepended) and, for pipeline binaries, the extensions added
 * to a copy of its list. The program's own structs are never written.
 * Valid as long as features. li NULL: the features stay as the program
 * asked. */
const VkDeviceCreateInfo *layer_features_enable(const layer_instance *li,
                                                VkPhysicalDevice physical_device,
                                                const VkDeviceCreateInfo *ci,
                                                layer_features *features);

typedef struct layer_device {
  void *key;
  VkDevice device;
  pid_t pid; /* the process that made it (a forked child does not own it) */
  int cache_control; /* made with pipelineCreationCacheControl (features.c) */
  int pipeline_binary; /* made with VK_KHR_pipeline_binary (features.c) */
  layer_instance *instance;
  PFN_vkGetDeviceProcAddr next_gdpa;
  /* The next layer's (or the driver's) entry points the layer wraps. */
  PFN_vkDestroyDevice DestroyDevice;
  PFN_vkCreateShaderModule CreateShaderModule;
  PFN_vkDestroyShaderModule DestroyShaderModule;
  PFN_vkCreateSampler CreateSampler;
  PFN_vkDestroySampler DestroySampler;
  PFN_vkCreateDescriptorSetLayout CreateDescriptorSetLayout;
  PFN_vkDestroyDescriptorSetLayout DestroyDescriptorSetLayout;
  PFN_vkCreatePipelineLayout CreatePipelineLayout;
  PFN_vkDestroyPipelineLayout DestroyPipelineLayout;
  PFN_vkCreateRenderPass CreateRenderPass;
  PFN_vkCreateRenderPass2 CreateRenderPass2;
  PFN_vkCreateRenderPass2 CreateRenderPass2KHR;
  PFN_vkDestroyRenderPass DestroyRenderPass;
  PFN_vkCreatePipelineCache CreatePipelineCache;
  PFN_vkDestroyPipelineCache DestroyPipelineCache;
  PFN_vkGetPipelineCacheData GetPipelineCacheData;
  PFN_vkMergePipelineCaches MergePipelineCaches;
  PFN_vkCreateGraphicsPipelines CreateGraphicsPipelines;
  PFN_vkCreateComputePipelines CreateComputePipelines;
  PFN_vkDestroyPipeline DestroyPipeline; /* forgets pipeline libraries */
  /* The client core's context; NULL when it could not be made, and then
   * every call passes straight through. */
  pcache_device *pc;
  /* Microseconds vkCreateDevice spent making it (segment, prefetch), and
   * its instance's open_us (the connection): start-up the program pays
   * that no pipeline's time shows (the report's setup_us). */
  uint64_t setup_us;
  layer_stats stats;
} layer_device;

/* An app's own VkPipelineCache, and the lock that orders the layer's
 * merges into it against the app's use of it (build.h). */
typedef struct layer_cache {
  void *device_key; /* non-dispatchable handles are unique per device only */
  VkPipelineCache handle;
  pthread_rwlock_t lock;
  /* State hashes whose entries the layer merged into it (value 1): a
   * pipeline built again with this cache needs no Get and no merge. */
  pcache__table received;
  /* Pipelines made with it from the device cache whose entries it has not
   * received yet: fetched in one go when the app reads the cache
   * (vkGetPipelineCacheData, or a merge from it), not one Get per creation.
   * May repeat a hash; pending_lock guards it. */
  pthread_mutex_t pending_lock;
  PCACHE_VEC(pcache__hash) pending;
} layer_cache;

/* Frees an app cache's record (not the VkPipelineCache: the program's). */
static inline void layer_cache_free(layer_cache *cache) {
  pthread_rwlock_destroy(&cache->lock);
  pthread_mutex_destroy(&cache->pending_lock);
  pcache_vec_free(&cache->pending);
  pcache__table_fini(&cache->received, NULL, NULL);
  pcache__free(cache);
}

/* The dispatch key of a dispatchable handle: the loader's table pointer,
 * the same for an instance and its physical devices, and for a device and
 * its queues and command buffers. */
static inline void *layer_key(const void *dispatchable) { return *(void *const *)dispatchable; }

/* registry.c. Lookups never fail for handles the layer has seen; NULL
 * otherwise. */
int layer_registry_add_instance(layer_instance *instance);
layer_instance *layer_registry_instance(const void *key);
layer_instance *layer_registry_remove_instance(const void *key);
int layer_registry_add_device(layer_device *device);
layer_device *layer_registry_device(const void *key);
layer_device *layer_registry_remove_device(const void *key);
/* Every live device, for the exit report. Calls fn under the registry's
 * lock. */
void layer_registry_each_device(void (*fn)(layer_device *device));
/* Removes and returns one live device made from instance, or NULL. */
layer_device *layer_registry_remove_device_of(const layer_instance *instance);
/* Removes and frees the records of a device's program caches. */
void layer_registry_drop_caches(const void *device_key);
int layer_registry_add_cache(layer_cache *cache);
layer_cache *layer_registry_cache(const void *device_key, VkPipelineCache handle);
layer_cache *layer_registry_remove_cache(const void *device_key, VkPipelineCache handle);

/* objects.c and pipelines.c: the intercepted functions by name, or NULL. */
PFN_vkVoidFunction layer_objects_proc(const char *name);
PFN_vkVoidFunction layer_pipelines_proc(const char *name);

/* A table of intercepted functions by name, and its lookup. */
typedef struct layer_proc {
  const char *name;
  PFN_vkVoidFunction fn;
} layer_proc;
#define LAYER_PROC(Name)                                                                           \
  { "vk" #Name, (PFN_vkVoidFunction)layer_##Name }

static inline PFN_vkVoidFunction layer_find_proc(const layer_proc *table, size_t n,
                                                 const char *name) {
  for (size_t i = 0; i < n; i++)
    if (!strcmp(name, table[i].name))
      return table[i].fn;
  return NULL;
}

/* stats.c */
void layer_stats_init(layer_stats *stats);
void layer_stats_fini(layer_stats *stats);
void layer_stats_unhashable(layer_stats *stats, const char *reason, uint32_t stype);
/* Sends the device's report to the daemon (best effort, within the
 * client's timeout) and writes it where PCACHE_LAYER_STATS / _FILE ask. */
void layer_stats_report(layer_device *device);

/* signals.c: while a device is watched (one call per device made), a
 * SIGTERM or SIGINT whose disposition was the default runs report (every
 * device's exit-time report) before the process ends by that signal; the
 * program's own handlers and ignored signals are left alone. unwatch:
 * one device fewer; with none, the reporting thread ends. Any thread. */
void layer_signals_watch(void (*report)(void));
void layer_signals_unwatch(void);

#endif
