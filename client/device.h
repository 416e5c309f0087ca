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

#include "client/core.h"
#include "proto/segment.h"
#include "common/queue.h"

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
  /* What every concern shares (core.h). */
  pcache__core core;
  /* Staging (build.h, "Staging"), set once the daemon answered at
   * creation: stage_hits, a driver hit's description goes up as a staged
   * build; stage_compiles, a true miss is compiled as the program would and
   * staged. staged: state hashes staged here (value 1), each once. */
  int stage_hits, stage_compiles;
  pcache__table staged;
  /* State hashes built in this process (value 1), whose pipelines the
   * device cache therefore holds; a build in flight is a claim others wait
   * on (build.c). */
  pcache__table built;

  pcache__table hash_tiers;   /* tier1_key -> pcache_tier * (by state hash) */
  pcache__table app_tiers;    /* app global key -> pcache_tier * (by draw key) */
  pthread_mutex_t tiers_lock; /* guards the list of tiers, for end_frame */
  PCACHE_VEC(pcache_tier *) tiers;

  pthread_mutex_t owned_lock; /* every pipeline the context owns (owned.c) */
  pcache__owned owned;

  /* pcache_device_pipeline_cache's cache: made on the first call, never
   * merged into by pcache (appcache.c). */
  pthread_mutex_t app_cache_lock;
  _Atomic(VkPipelineCache) app_cache;

  /* cache_path (appcache.c): the path (NULL: none), what loading it
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
  /* A snapshot was refused here (snapshot.c): later prefetch pages ask for
   * none, since its report, sent by the upload thread, may not have
   * reached the daemon yet and the same one would come again. */
  atomic_int snapshot_refused;

  /* Misses without a stall (fastlink.c): NULL unless pcache_device_info.
   * fast_link asked for it and the device can. */
  struct pcache__fastlink *fastlink;
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

#endif
