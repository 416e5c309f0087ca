/* The small common core of a device context (struct pcache__core): what
 * every concern of the client may use, the Vulkan dispatch, the device's
 * handles and identity, the client and logger, the merged device cache and
 * the counters. Each concern keeps its own state in a struct of its own
 * header (upload.h, snapshot.h, segment.h, ...) and takes this core
 * besides; device.h composes them. A concern that includes this header
 * rather than device.h can be called by device.c without a loop. */
#ifndef PCACHE_CLIENT_CORE_H
#define PCACHE_CLIENT_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <pcache/pcache.h>

#include "client/client.h"
#include "client/desc.h"
#include "client/vkext.h"
#include "client/objmap.h"
#include "client/table.h"
#include "proto/desc_check.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/vec.h"

/* A device's VK_KHR_pipeline_binary entry points (client/binary.c): the
 * client's device fills one, and pcache-replay its own (replay/replay_vk.c),
 * so that both capture and pack binaries through the same code. */
typedef struct pcache__binary_vk {
  VkDevice device;
  const VkAllocationCallbacks *allocator; /* the binaries' */
  PFN_vkCreatePipelineBinariesKHR CreatePipelineBinaries;
  PFN_vkDestroyPipelineBinaryKHR DestroyPipelineBinary;
  PFN_vkGetPipelineBinaryDataKHR GetPipelineBinaryData;
  PFN_vkReleaseCapturedPipelineDataKHR ReleaseCapturedPipelineData;
} pcache__binary_vk;

/* The counters behind pcache_device_get_stats and _get_counters; any
 * concern adds to them, without a lock. */
typedef struct pcache__stats {
  atomic_uint_fast64_t misses, daemon_hits, driver_cache_hits, driver_hits, compiles, unhashable,
      uploaded, prefetched, rejected_blobs, pipelines_this_frame, pipelines, snapshot_loaded,
      snapshots_uploaded, released, reused_handles, cache_file_loaded, cache_file_saved,
      segment_refused, fast_links, optimized, swaps, swap_ns_total, swap_ns_max, swap_frames_total,
      parts_made, links_only, prepared, upload_dropped, staged;
} pcache__stats;

typedef struct pcache__core {
  pcache_client *client;
  /* Where messages go: the app's client's logger, even when that client
   * never talks to the daemon (client is then NULL); $PCACHE_LOG's alone
   * without one. */
  pcache__logger *log;
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice vk_device;
  VkAllocationCallbacks allocator_copy;
  const VkAllocationCallbacks *allocator;
  int creation_feedback;
  /* A miss asks the driver's own caches first (build.c, "driver first"):
   * the app enabled pipelineCreationCacheControl (pcache_device_info.
   * cache_control) and $PCACHE_DRIVER_FIRST is not 0. */
  int driver_first;
  /* Binary mode (binary.c, docs/client.md "Pipeline binaries"): pipelines
   * are stored as the driver's VK_KHR_pipeline_binary data, under bin_key,
   * which every request to the daemon then names (pcache__device_wire_key);
   * key stays the VkPipelineCache key the cache file is checked against. */
  int binary;
  pcache__devkey bin_key;
  pcache__binary_vk bin_vk;
  uint32_t instance_api_version; /* what the app's instance asked for; 0: 1.0 */
  uint32_t ownership;            /* PCACHE_PIPELINES_* */
  int passthrough;               /* every pipeline call straight to the driver */
  VkPipelineCache given_cache;   /* the app's pipeline_cache (pass-through only) */
  int no_snapshot;               /* PCACHE_NO_SNAPSHOT=1: neither load nor upload one */

  PFN_vkCreatePipelineCache CreatePipelineCache;
  PFN_vkDestroyPipelineCache DestroyPipelineCache;
  PFN_vkGetPipelineCacheData GetPipelineCacheData;
  PFN_vkMergePipelineCaches MergePipelineCaches;
  PFN_vkCreateGraphicsPipelines CreateGraphicsPipelines;
  PFN_vkCreateComputePipelines CreateComputePipelines;
  PFN_vkDestroyPipeline DestroyPipeline;
  PFN_vkCreateShaderModule CreateShaderModule;
  PFN_vkDestroyShaderModule DestroyShaderModule;
  PFN_vkCreateDescriptorSetLayout CreateDescriptorSetLayout;
  PFN_vkDestroyDescriptorSetLayout DestroyDescriptorSetLayout;
  PFN_vkCreatePipelineLayout CreatePipelineLayout;
  PFN_vkDestroyPipelineLayout DestroyPipelineLayout;
  PFN_vkCreateRenderPass CreateRenderPass;
  PFN_vkCreateRenderPass2 CreateRenderPass2;
  PFN_vkDestroyRenderPass DestroyRenderPass;
  PFN_vkCreateSampler CreateSampler;
  PFN_vkDestroySampler DestroySampler;

  pcache__devkey key;
  char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
  char driver_name[VK_MAX_DRIVER_NAME_SIZE];
  char driver_info[VK_MAX_DRIVER_INFO_SIZE];
  uint32_t driver_id, api_version;
  uint8_t device_uuid[VK_UUID_SIZE]; /* VkPhysicalDeviceIDProperties; if has_device_uuid */
  int has_device_uuid;

  /* The merged device cache. Creating pipelines with it takes the read
   * side; vkMergePipelineCaches (dstCache externally synchronized) the
   * write side. */
  VkPipelineCache cache;
  pthread_rwlock_t cache_lock;
  int creating; /* inside pcache_device_create: the cache may be replaced */
  /* State hashes the daemon's data merged into the device cache (value
   * 1): prefetch pages, the snapshot, the segment. A miss on one of them
   * does not ask the daemon again. Grows while the upload thread fetches
   * later prefetch pages; readers probe its published part without a
   * lock. */
  pcache__table prefetched;

  pcache__objmap *objects;
  pcache__desc_lookup lookup;
  pcache__shard *shards; /* PCACHE__SHARDS, 128-byte aligned in shards_mem */
  void *shards_mem;

  pcache__stats stats;
} pcache__core;

/* Stores a Vulkan call's result where the app asked (ret_vk_result). */
static inline void pcache__device_info_set_result(const pcache_device_info *info, VkResult vr) {
  if (info->ret_vk_result)
    *info->ret_vk_result = vr;
}

/* The key requests to the daemon name: the binary key in binary mode. */
static inline const pcache__devkey *pcache__device_wire_key(const pcache__core *d) {
  return d->binary ? &d->bin_key : &d->key;
}

/* The DeviceInfo that Put and PutSnapshot carry; points into d. */
static inline void pcache__device_info_message(const pcache__core *d,
                                               Pcachepb__DeviceInfo *ret_info) {
  pcachepb__device_info__init(ret_info);
  ret_info->key.data = (uint8_t *)pcache__device_wire_key(d)->bytes;
  ret_info->key.len = PCACHE_DEVKEY_SIZE;
  ret_info->name = (char *)d->device_name;
  ret_info->driver_id = d->driver_id;
  ret_info->api_version = d->api_version;
  ret_info->driver_name = (char *)d->driver_name;
  ret_info->driver_info = (char *)d->driver_info;
  if (d->has_device_uuid) {
    ret_info->device_uuid.data = (uint8_t *)d->device_uuid;
    ret_info->device_uuid.len = VK_UUID_SIZE;
  }
}

/* The lock of a VkPipelineCache that creations read and merges write (the
 * device cache, and the layer's program caches): merges are rare and
 * short, and must not wait behind a stream of creations, each holding the
 * read side for a whole compile. 0, or an errno value. */
static inline int pcache__cache_lock_init(pthread_rwlock_t *lock) {
  pthread_rwlockattr_t attr;
  int r;
  pthread_rwlockattr_init(&attr);
  pthread_rwlockattr_setkind_np(&attr, PTHREAD_RWLOCK_PREFER_WRITER_NONRECURSIVE_NP);
  r = pthread_rwlock_init(lock, &attr);
  pthread_rwlockattr_destroy(&attr);
  return r;
}

/* A state hash as the two keys of a pcache__table. */
static inline void pcache__hash_keys(const uint8_t *bytes, uint64_t *ret_k0, uint64_t *ret_k1) {
  memcpy(ret_k0, bytes, 8);
  memcpy(ret_k1, bytes + 8, 8);
}

static inline uint64_t pcache__pipeline_to_u64(VkPipeline p) {
  uint64_t v = 0;
  memcpy(&v, &p, sizeof p);
  return v;
}
static inline VkPipeline pcache__pipeline_from_u64(uint64_t v) {
  VkPipeline p;
  memcpy(&p, &v, sizeof p);
  return p;
}

#endif
