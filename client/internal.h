/* libpcache's insides, shared by its files: the client (connection to the
 * daemon), the device context, the object map, the pipeline tiers and the
 * upload thread. */
#ifndef PCACHE_CLIENT_INTERNAL_H
#define PCACHE_CLIENT_INTERNAL_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>

#include <pcache/pcache.h>

#include "client/desc.h"
#include "client/table.h"
#include "client/transport.h"
#include "common/desc_check.h"
#include "common/devkey.h"
#include "common/hash.h"

/* ------------------------------------------------------------------ client */

struct pcache_client {
  char *socket_path; /* NULL: nowhere to connect (local only) */
  char *app_name;
  uint32_t timeout_ms;
  int disabled;
  pthread_mutex_t lock; /* guards transport, last_attempt_ms, limits */
  pcache_transport *transport;
  uint64_t last_attempt_ms; /* of the last failed connect or call */
  int attempted;
  uint32_t max_hashes;
  uint64_t max_blob;
  uint64_t max_snapshot; /* 0: a daemon without snapshots */
  uint64_t max_frame;
  atomic_int connected;
};

uint64_t pcache__now_ms(void);
uint64_t pcache__now_ns(void);

/*
 * pcache__client_call - one request/reply exchange within timeout_ms,
 * connecting first if needed and allowed (at most once a second). Returns
 * 0 with a reply whose status the caller checks, PCACHE_EDISABLED,
 * PCACHE_EUNAVAILABLE, -ETIMEDOUT, or a transport failure (the connection
 * is then closed and the client marked disconnected).
 */
int pcache__client_call(pcache_client *client, const Pcachepb__Request *request,
                        uint32_t timeout_ms, pcache_reply *ret_reply);
/* The daemon's limit on items per request (default when unknown). */
uint32_t pcache__client_max_hashes(pcache_client *client);

/* ------------------------------------------------------------------ device */

/* SPIR-V code kept for uploads: Put items carry the code of modules the
 * daemon may lack. Shared by the object map and queued uploads. */
typedef struct pcache_module {
  atomic_uint refs;
  pcache_hash128 hash;
  size_t size;
  uint8_t *code;
} pcache_module;

pcache_module *pcache__module_ref(pcache_module *module);
void pcache__module_unref(pcache_module *module);

typedef struct pcache_upload {
  struct pcache_upload *next;
  pcache_hash128 state_hash;
  uint32_t kind; /* Pcachepb__EntryKind */
  uint8_t *blob;
  size_t blob_size;
  uint8_t *desc;
  size_t desc_size;
  uint64_t compile_ns;
  size_t n_modules;
  pcache_module *modules[PCACHE_DESC_MAX_MODULES];
  int force_code; /* the daemon said it lacks a module: send all code */
} pcache_upload;

struct pcache_tier {
  struct pcache_device *device;
  pcache_table table; /* app draw key or state hash -> VkPipeline */
};

typedef struct pcache_objmap pcache_objmap;

/* Per-thread shards of what the hit paths write, so hits on different
 * cores never write the same cache line: each thread takes a shard once
 * (round robin), pcache_device_get_stats sums them. 128 bytes apart, since
 * x86 prefetches cache lines in pairs. More threads than shards share one,
 * which is still correct (the increments are atomic), just slower. */
#define PCACHE__SHARDS 64u
typedef struct pcache_shard {
  _Alignas(128) atomic_uint_fast64_t hits_app_key;
  atomic_uint_fast64_t hits_create_info;
  atomic_uint readers[2]; /* object map read sections, by epoch parity */
} pcache_shard;

/* The calling thread's shard index, 0..PCACHE__SHARDS-1. */
#if defined(__GNUC__)
extern _Thread_local unsigned pcache__tls_shard __attribute__((tls_model("initial-exec")));
#else
extern _Thread_local unsigned pcache__tls_shard;
#endif
unsigned pcache__shard_assign(void);
static inline unsigned pcache__shard_index(void) {
  unsigned s = pcache__tls_shard;
  return s ? s - 1 : pcache__shard_assign();
}

struct pcache_device {
  pcache_client *client;
  VkInstance instance;
  VkPhysicalDevice physical_device;
  VkDevice vk_device;
  VkAllocationCallbacks allocator_copy;
  const VkAllocationCallbacks *allocator;
  int creation_feedback;

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

  pcache_devkey key;
  char device_name[VK_MAX_PHYSICAL_DEVICE_NAME_SIZE];
  char driver_name[VK_MAX_DRIVER_NAME_SIZE];
  char driver_info[VK_MAX_DRIVER_INFO_SIZE];
  uint32_t driver_id, api_version;

  /* The merged device cache. Creating pipelines with it takes the read
   * side; vkMergePipelineCaches (dstCache externally synchronized) the
   * write side. */
  VkPipelineCache cache;
  pthread_rwlock_t cache_lock;

  /* State hashes the prefetch merged (value 1): a miss on one of them does
   * not ask the daemon again. Grows while the upload thread fetches later
   * prefetch pages; readers probe its published part without a lock. */
  pcache_table prefetched;

  pcache_objmap *objects;
  pcache_desc_lookup lookup;

  pcache_table hash_tiers; /* tier1_key -> pcache_tier * (by state hash) */
  pcache_table app_tiers;  /* app global key -> pcache_tier * (by draw key) */
  pthread_mutex_t tiers_lock; /* guards the list of tiers, for end_frame */
  pcache_tier **tiers;
  size_t n_tiers, cap_tiers;

  pthread_mutex_t owned_lock; /* every pipeline the context made */
  VkPipeline *owned;
  size_t n_owned, cap_owned;

  /* Upload queue and thread (only when a client may reach a daemon). */
  pthread_mutex_t upload_lock;
  pthread_cond_t upload_cond; /* work arrived, or stop */
  pthread_cond_t flush_cond;  /* queue drained */
  pcache_upload *queue_head, *queue_tail;
  size_t queue_len, in_flight;
  uint64_t upload_dropped;
  int upload_stop, upload_thread_running;
  int retry_now; /* a flush wants the next try now, not after the backoff */
  pthread_t upload_thread;
  int cancel_fd; /* eventfd: written at stop, ends the thread's call in flight */
  /* Prefetch pages the device creation had no time for: the upload thread
   * fetches them, from prefetch_offset, before any upload. */
  int prefetch_pending;
  uint32_t prefetch_offset;
  int snapshot_wanted;   /* flush/destroy asked for a snapshot upload */
  int snapshot_in_flight;
  pcache_hash128 *sent_modules; /* module hashes the daemon acknowledged */
  size_t n_sent_modules, cap_sent_modules;

  /* What the device cache holds, for the (device, app) snapshot: the
   * state hashes merged into it (the loaded snapshot's, prefetched and
   * fetched blobs, compiles), and whether any came after the snapshot
   * loaded at creation (dirty: worth uploading a new one). Appended after
   * the merge that brought the hash in, so a copy of the list taken under
   * the cache lock's read side names only what the cache data holds. */
  pthread_mutex_t held_lock;
  pcache_hash128 *held;
  size_t n_held, cap_held;
  int held_dirty;
  int creating; /* inside pcache_device_create: the cache may be replaced */
  int no_snapshot; /* PCACHE_NO_SNAPSHOT=1: neither load nor upload one */

  pcache_shard *shards; /* PCACHE__SHARDS, 128-byte aligned in shards_mem */
  void *shards_mem;

  struct {
    atomic_uint_fast64_t misses, daemon_hits,
        driver_cache_hits, compiles, unhashable, uploaded, prefetched, rejected_blobs,
        pipelines_this_frame, pipelines, snapshot_loaded, snapshots_uploaded;
  } stats;
};

/* device.c */
/* The DeviceInfo that Put and PutSnapshot carry; points into d. */
void pcache__device_info_message(const pcache_device *d, Pcachepb__DeviceInfo *ret_info);
int pcache__device_own_pipeline(pcache_device *device, VkPipeline pipeline);
int pcache__device_prefetched(const pcache_device *device, const pcache_hash128 *hash);
pcache_module *pcache__device_module_for(pcache_device *device, VkShaderModule module);
/* A read section of the object map, around every call that hands
 * device->lookup to the describer. Lock-free; never call a pcache_create_ or
 * pcache_destroy_ wrapper inside one (they wait for read sections). */
void *pcache__device_describe_begin(pcache_device *device);
void pcache__device_describe_end(void *token);
/* Checks a blob the daemon sent and merges it into the device cache.
 * Returns 0, or the Pcachepb__ReportReason (positive) it was refused for. */
int pcache__device_merge_blob(pcache_device *device, const uint8_t *blob, size_t size,
                              uint64_t checksum);
/* One prefetch page from offset: asks within timeout_ms, checks every blob,
 * merges the good ones with one vkMergePipelineCaches, adds their hashes to
 * the prefetched set and reports the bad ones. Returns 0 with the offset of
 * the next page and whether the daemon has more, or the call's failure.
 * ret_call_ns (may be NULL): time spent waiting on the daemon for the page
 * (not the checks and merge, which are driver work). */
int pcache__device_prefetch_page(pcache_device *device, uint32_t offset, uint32_t timeout_ms,
                                 uint32_t *ret_next, int *ret_more, uint64_t *ret_call_ns);
void pcache__device_report(pcache_device *device, const Pcachepb__ReportItem *const *items,
                           size_t n_items);
void pcache__device_add_tier(pcache_device *device, pcache_tier *tier);
/* Records that the device cache now holds hash's pipeline (after the
 * merge); dirty: it came after the loaded snapshot. */
void pcache__device_held(pcache_device *device, const uint8_t hash[PCACHE_HASH_SIZE], int dirty);
/* Upload thread: one PutSnapshot of the device cache when anything was
 * added since the loaded snapshot. 0, or <0 to try again later. */
int pcache__device_snapshot_upload(pcache_device *device);

/* upload.c */
int pcache__upload_start(pcache_device *device);
/* Takes ownership of item (freed on failure too). */
void pcache__upload_enqueue(pcache_device *device, pcache_upload *item);
int pcache__upload_flush(pcache_device *device, uint32_t timeout_ms);
void pcache__upload_stop(pcache_device *device);
void pcache__upload_free(pcache_upload *item);
uint64_t pcache__upload_queue_len(pcache_device *device);
/* Hands the prefetch pages from offset on to the upload thread. */
void pcache__upload_prefetch_rest(pcache_device *device, uint32_t offset);
/* Asks the upload thread for a snapshot upload when the device cache
 * changed since the loaded snapshot (after the queued pipelines). */
void pcache__upload_want_snapshot(pcache_device *device);

/* objmap (device.c) */
void pcache__objmap_free(pcache_objmap *map);

/* pipeline.c */
void pcache__pipeline_free_tier(uint64_t value, void *ctx);

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
