/* The app's side of the device cache (appcache.c): the VkPipelineCache it
 * hands in (merged once at creation), the cache pcache_device_pipeline_
 * cache hands out (never merged into), and cache_path, the file that keeps
 * the device cache between runs without a daemon. */
#ifndef PCACHE_CLIENT_APPCACHE_H
#define PCACHE_CLIENT_APPCACHE_H

#include "client/core.h"

typedef struct pcache__appcache_state {
  /* pcache_device_pipeline_cache's cache: made on the first call, never
   * merged into by pcache. */
  pthread_mutex_t lock;
  _Atomic(VkPipelineCache) cache;
  /* cache_path: the path (NULL: none), what loading it gave, and the
   * checksum of the data last loaded or saved, so an unchanged cache is
   * not written again. */
  char *path;
  int file_status;
  int file_sum_known;
  uint64_t file_sum;
  pthread_mutex_t file_lock; /* one save at a time */
} pcache__appcache_state;

/* The file's header: magic, format version, header size, device key,
 * data size, XXH3-64 of the data; then the data, as
 * vkGetPipelineCacheData gave it. Little-endian. */
#define PCACHE__CACHE_FILE_MAGIC "PCACHEF\n"
#define PCACHE__CACHE_FILE_VERSION 1u
#define PCACHE__CACHE_FILE_HEADER 64

/*
 * pcache__appcache_load - at creation: merges the app's pipeline_cache
 * (if any) and cache_path's data (if the file passes every check) into the
 * device cache. What became of the file goes to device->cache_file_status.
 * Never fails.
 */
void pcache__appcache_load(pcache_device *device, VkPipelineCache app_cache);

/*
 * pcache__appcache_save - writes cache_path from the device cache (and
 * the cache pcache_device_pipeline_cache handed out) unless it is what was
 * last loaded or saved. 0 (also with no cache_path), or -errno.
 */
int pcache__appcache_save(pcache_device *device);

/* pcache_device_pipeline_cache's cache, made on the first call. */
VkPipelineCache pcache__appcache_get(pcache_device *device);

/* Destroys what appcache.c made (destroy). */
void pcache__appcache_fini(pcache_device *device);

#endif
