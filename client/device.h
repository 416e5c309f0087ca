/* The device context's data (struct pcache_device), its core constructor
 * (device.c), and the small helpers every file of the client core shares.
 * Each other file's functions are declared in that file's own header
 * (objmap.h, record.h, blobs.h, snapshot.h, prefetch.h, upload.h, build.h,
 * pipeline.h), so no header ties two files together. */
#ifndef PCACHE_CLIENT_DEVICE_H
#define PCACHE_CLIENT_DEVICE_H

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
#include "proto/segment.h"
#include "common/devkey.h"
#include "common/hash.h"
#include "common/queue.h"
#include "common/vec.h"

typedef struct pcache__upload {
  struct pcache__upload *next;
  pcache__hash state_hash;
  uint32_t kind; /* Pcachepb__EntryKind */
  uint8_t *blob;
  size_t blob_size;
  uint8_t *desc;
  size_t desc_size;
  uint64_t compile_ns;
  size_t n_modules;
  pcache__module *modules[PCACHE_DESC_MAX_MODULES];
  int force_code; /* the daemon said it lacks a module: send all code */
  /* A staged build (Put.stage): blob is empty, the daemon's replayer builds
   * it (build.h, "Staging"). A batch is all staged or all not. */
  int staged;
} pcache__upload;

/* The device's upload queue, a batch taken off it, and the batch's retries. */
typedef PCACHE_QUEUE(pcache__upload) pcache__upload_queue;

/* The owned pipelines (owned.c). */
typedef struct pcache__owned_entry pcache__owned_entry;
typedef struct pcache__owned {
  pcache__owned_entry **buckets;
  size_t n_buckets, count;
} pcache__owned;

/* A refused blob's report, queued for the upload thread (reports.h). */
typedef struct pcache__refused {
  pcache__hash hash;
  uint32_t reason; /* Pcachepb__ReportReason */
} pcache__refused;
#define PCACHE__REFUSED_MAX 4096u

struct pcache_tier {
  struct pcache_device *device;
  pcache__table table; /* app draw key or state hash -> VkPipeline */
};

struct pcache_device {
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
  /* Staging (build.h, "Staging"), set once the daemon answered at
   * creation: stage_hits, a driver hit's description goes up as a staged
   * build; stage_compiles, a true miss is compiled as the program would and
   * staged. staged: state hashes staged here (value 1), each once. */
  int stage_hits, stage_compiles;
  pcache__table staged;
  /* Binary mode (binary.c, docs/client.md "Pipeline binaries"): pipelines
   * are stored as the driver's VK_KHR_pipeline_binary data, under bin_key,
   * which every request to the daemon then names (pcache__device_wire_key);
   * key stays the VkPipelineCache key the cache file is checked against. */
  int binary;
  pcache__devkey bin_key;
  PFN_vkCreatePipelineBinariesKHR CreatePipelineBinaries;
  PFN_vkDestroyPipelineBinaryKHR DestroyPipelineBinary;
  PFN_vkGetPipelineBinaryDataKHR GetPipelineBinaryData;
  PFN_vkReleaseCapturedPipelineDataKHR ReleaseCapturedPipelineData;
  uint32_t instance_api_version; /* what the app's instance asked for; 0: 1.0 */
  uint32_t ownership;            /* PCACHE_PIPELINES_* */
  int passthrough;               /* every pipeline call straight to the driver */
  VkPipelineCache given_cache;   /* the app's pipeline_cache (pass-through only) */

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

  /* State hashes the prefetch merged (value 1): a miss on one of them does
   * not ask the daemon again. Grows while the upload thread fetches later
   * prefetch pages; readers probe its published part without a lock. */
  pcache__table prefetched;
  /* State hashes built in this process (value 1), whose pipelines the
   * device cache therefore holds; a build in flight is a claim others wait
   * on (build.c). */
  pcache__table built;

  pcache__objmap *objects;
  pcache__desc_lookup lookup;

  pcache__table hash_tiers;   /* tier1_key -> pcache_tier * (by state hash) */
  pcache__table app_tiers;    /* app global key -> pcache_tier * (by draw key) */
  pthread_mutex_t tiers_lock; /* guards the list of tiers, for end_frame */
  PCACHE_VEC(pcache_tier *) tiers;

  pthread_mutex_t owned_lock; /* every pipeline the context owns (owned.c) */
  pcache__owned owned;

  /* pcache_device_pipeline_cache's cache: made on the first call, never
   * merged into by pcache (cachefile.c). */
  pthread_mutex_t app_cache_lock;
  _Atomic(VkPipelineCache) app_cache;

  /* cache_path (cachefile.c): the path (NULL: none), what loading it
   * gave, and the checksum of the data last loaded or saved, so an
   * unchanged cache is not written again. */
  char *cache_path;
  int cache_file_status;
  int cache_file_sum_known;
  uint64_t cache_file_sum;
  pthread_mutex_t cache_file_lock; /* one save at a time */

  /* Upload queue and thread (only when a client may reach a daemon). */
  pthread_mutex_t upload_lock;
  pthread_cond_t upload_cond; /* work arrived, or stop */
  pthread_cond_t flush_cond;  /* queue drained */
  pcache__upload_queue queue;
  size_t queue_len, in_flight; /* items in queue, and in the batch being sent */
  uint64_t queue_bytes;        /* what the queued items own (upload.c, QUEUE_MAX_BYTES) */
  uint64_t upload_failures; /* batches the daemon did not take (away, slow, refused) */
  int upload_stop, upload_thread_running;
  int retry_now; /* a flush wants the next try now, not after the backoff */
  pthread_t upload_thread;
  int cancel_fd; /* eventfd: written at stop, ends the thread's call in flight */
  /* Prefetch pages the device creation had no time for: the upload thread
   * fetches them, from prefetch_offset, before any upload. */
  int prefetch_pending;
  uint32_t prefetch_offset;
  int snapshot_wanted; /* flush/destroy asked for a snapshot upload */
  /* State hashes of prefetched blobs that pipelines were built from, for
   * the next Report (used): the daemon counts a use only when told. */
  PCACHE_VEC(pcache__hash) used;
  int used_in_flight;
  /* Reports of refused blobs, for the next Report (reports.c). */
  PCACHE_VEC(pcache__refused) refused;
  uint32_t refused_snapshot; /* a Pcachepb__ReportReason; 0: none to report */
  uint64_t refused_snapshot_checksum; /* the refused one's, so a newer one stays */
  int refused_in_flight;
  int snapshot_in_flight;
  PCACHE_VEC(pcache__hash) sent_modules; /* module hashes the daemon acknowledged */

  /* What the device cache holds, for the (device, app) snapshot: the
   * state hashes merged into it (the loaded snapshot's, prefetched and
   * fetched blobs, compiles), and whether any came after the snapshot
   * loaded at creation (dirty: worth uploading a new one). Appended after
   * the merge that brought the hash in, so a copy of the list taken under
   * the cache lock's read side names only what the cache data holds. */
  pthread_mutex_t held_lock;
  PCACHE_VEC(pcache__hash) held;
  int held_dirty;
  int creating;    /* inside pcache_device_create: the cache may be replaced */
  /* The (device, app) shared-memory segment mapped at creation, or NULL
   * (segment.c); read-only and unchanged until the device is destroyed. */
  pcache__seg_map *segment;
  /* Per index entry of the segment: its blob was refused (checks or the
   * driver) and was reported; a miss then asks the daemon, not it again. */
  _Atomic unsigned char *segment_refused;
  /* The segment's snapshot (segment.c): PCACHE__SEG_SNAPSHOT_*. Loaded at
   * creation with the prefetch, or without one at the first miss it
   * covers. */
  atomic_int segment_snapshot;
  int no_snapshot; /* PCACHE_NO_SNAPSHOT=1: neither load nor upload one */
  /* A snapshot was refused here (snapshot.c): later prefetch pages ask for
   * none, since its report, sent by the upload thread, may not have
   * reached the daemon yet and the same one would come again. */
  atomic_int snapshot_refused;

  /* Misses without a stall (fastlink.c): NULL unless pcache_device_info.
   * fast_link asked for it and the device can. */
  struct pcache__fastlink *fastlink;

  pcache__shard *shards; /* PCACHE__SHARDS, 128-byte aligned in shards_mem */
  void *shards_mem;

  struct {
    atomic_uint_fast64_t misses, daemon_hits, driver_cache_hits, driver_hits, compiles, unhashable,
        uploaded, prefetched, rejected_blobs, pipelines_this_frame, pipelines, snapshot_loaded,
        snapshots_uploaded, released, reused_handles, cache_file_loaded, cache_file_saved,
        segment_refused, fast_links, optimized, swaps, swap_ns_total, swap_ns_max,
        swap_frames_total, parts_made, links_only, prepared, upload_dropped, staged;
  } stats;
};

/*
 * pcache__device_create - the core of pcache_device_create, shared by
 * libpcache (client/loader.c, which checks the app's struct and defaults
 * gipa to the loader's) and the Vulkan layer (which passes the next
 * layer's entry points). gdpa may be NULL: then gipa's vkGetDeviceProcAddr.
 * Nothing here references a symbol of the Vulkan loader, so the layer can
 * link it without binding to an app's globals named like Vulkan functions.
 * Returns 0, -ENOMEM, -EINVAL, or PCACHE_EVULKAN when the driver refuses
 * the cache (its VkResult stored through info->ret_vk_result).
 */
int pcache__device_create(pcache_client *client, const pcache_device_info *info,
                          PFN_vkGetInstanceProcAddr gipa, PFN_vkGetDeviceProcAddr gdpa,
                          pcache_device **ret_device);

/* Stores a Vulkan call's result where the app asked (ret_vk_result). */
static inline void pcache__device_info_set_result(const pcache_device_info *info, VkResult vr) {
  if (info->ret_vk_result)
    *info->ret_vk_result = vr;
}

/* The key requests to the daemon name: the binary key in binary mode. */
static inline const pcache__devkey *pcache__device_wire_key(const pcache_device *d) {
  return d->binary ? &d->bin_key : &d->key;
}

/* The DeviceInfo that Put and PutSnapshot carry; points into d. */
static inline void pcache__device_info_message(const pcache_device *d,
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
