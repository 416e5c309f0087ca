/* The app's side of the device cache: see appcache.h.
 *
 * cache_path is the app's own cache file, kept by pcache whether or not a
 * daemon runs, so a machine without pcached still starts warm. Its data is
 * the driver's (vkGetPipelineCacheData) behind a header of pcache's own,
 * because the driver's header alone cannot tell a truncated or corrupted
 * body, and such data can make vkCreatePipelineCache fail or worse: the
 * length, the checksum, the whole device key (driver version included)
 * and then the driver's header (common/blob.c) are checked before the
 * driver sees a byte. A file that fails is ignored, never repaired, and
 * replaced by the next save. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/device.h"
#include "client/appcache.h"
#include "client/blobs.h"
#include "common/alloc.h"
#include "common/blob.h"
#include "common/bytes.h"

/* Larger than any pipeline cache an app has reason to keep: a bound on
 * what a damaged size field can make us allocate. */
#define MAX_FILE_DATA ((uint64_t)1 << 30)

static int read_file(const char *path, uint8_t **ret_bytes, size_t *ret_size) {
  struct stat st;
  uint8_t *bytes = NULL;
  size_t got = 0;
  int r = 0;
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return -errno;
  if (fstat(fd, &st) < 0) {
    r = -errno;
    goto out_close;
  }
  if (!S_ISREG(st.st_mode) || (uint64_t)st.st_size > MAX_FILE_DATA + PCACHE__CACHE_FILE_HEADER) {
    r = PCACHE_EBAD_SIZE;
    goto out_close;
  }
  bytes = pcache__malloc(st.st_size ? (size_t)st.st_size : 1);
  if (!bytes) {
    r = -ENOMEM;
    goto out_close;
  }
  while (got < (size_t)st.st_size) {
    ssize_t n = read(fd, bytes + got, (size_t)st.st_size - got);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0) {
      r = n < 0 ? -errno : PCACHE_EBAD_SIZE; /* shrank while we read */
      goto out_free;
    }
    got += (size_t)n;
  }
  *ret_bytes = bytes;
  *ret_size = got;
  goto out_close;
out_free:
  pcache__free(bytes);
out_close:
  close(fd);
  return r;
}

/* Every check before the driver sees the data; 0 or why not. */
static int check_file(const pcache_device *d, const uint8_t *bytes, size_t size) {
  uint64_t data_size;
  if (size < PCACHE__CACHE_FILE_HEADER || memcmp(bytes, PCACHE__CACHE_FILE_MAGIC, 8) != 0)
    return PCACHE_ECACHE_FILE;
  if (pcache__le32(bytes + 8) != PCACHE__CACHE_FILE_VERSION ||
      pcache__le32(bytes + 12) != PCACHE__CACHE_FILE_HEADER)
    return PCACHE_ECACHE_FILE;
  if (memcmp(bytes + 16, d->core.key.bytes, PCACHE_DEVKEY_SIZE) != 0)
    return PCACHE_EWRONG_DEVICE;
  data_size = pcache__le64(bytes + 48);
  if (data_size != size - PCACHE__CACHE_FILE_HEADER)
    return PCACHE_EBAD_SIZE;
  if (pcache__checksum64(bytes + PCACHE__CACHE_FILE_HEADER, (size_t)data_size) !=
      pcache__le64(bytes + 56))
    return PCACHE_ECHECKSUM;
  return pcache__blob_check_header(bytes + PCACHE__CACHE_FILE_HEADER, (size_t)data_size,
                                   &d->core.key);
}

static void load_file(pcache_device *d) {
  uint8_t *bytes = NULL;
  size_t size = 0;
  Pcachepb__ReportReason reason;
  int r = read_file(d->appcache.path, &bytes, &size);
  if (r == -ENOENT) /* the first run */
    return;
  if (r == 0)
    r = check_file(d, bytes, size);
  if (r == 0) {
    const uint8_t *data = bytes + PCACHE__CACHE_FILE_HEADER;
    size_t data_size = size - PCACHE__CACHE_FILE_HEADER;
    uint64_t sum = pcache__le64(bytes + 56);
    if (pcache__blob_merge(d, data, data_size, sum, &reason) == 0) {
      atomic_store(&d->core.stats.cache_file_loaded, data_size);
      d->appcache.file_sum = sum;
      d->appcache.file_sum_known = 1;
    } else {
      r = PCACHE_EVULKAN;
    }
  }
  d->appcache.file_status = r;
  pcache__free(bytes);
}

void pcache__appcache_load(pcache_device *d, VkPipelineCache app_cache) {
  if (app_cache != VK_NULL_HANDLE) {
    /* A merge's sources need no synchronization: the app may go on using
     * its cache meanwhile. A refusal leaves the device cache as it was. */
    pthread_rwlock_wrlock(&d->core.cache_lock);
    (void)d->core.MergePipelineCaches(d->core.vk_device, d->core.cache, 1, &app_cache);
    pthread_rwlock_unlock(&d->core.cache_lock);
  }
  if (d->appcache.path)
    load_file(d);
}

/* The device cache's data, read under the cache lock's read side (merges
 * wait; creations may still add entries, so a size that grew is read
 * again). 0 or -ENOMEM / -EIO. */
static int cache_data(pcache_device *d, uint8_t **ret_data, size_t *ret_size) {
  int r = -EIO;
  pthread_rwlock_rdlock(&d->core.cache_lock);
  for (int tries = 0; tries < 4; tries++) {
    size_t size = 0;
    uint8_t *data;
    VkResult vr;
    if (d->core.GetPipelineCacheData(d->core.vk_device, d->core.cache, &size, NULL) != VK_SUCCESS)
      break;
    data = pcache__malloc(PCACHE__CACHE_FILE_HEADER + size + 1);
    if (!data) {
      r = -ENOMEM;
      break;
    }
    vr = d->core.GetPipelineCacheData(d->core.vk_device, d->core.cache, &size,
                                      data + PCACHE__CACHE_FILE_HEADER);
    if (vr == VK_SUCCESS) {
      *ret_data = data;
      *ret_size = size;
      r = 0;
      break;
    }
    pcache__free(data);
    if (vr != VK_INCOMPLETE)
      break;
  }
  pthread_rwlock_unlock(&d->core.cache_lock);
  return r;
}

/* Writes all of bytes to a new file beside path, flushes it to disk and
 * renames it over path: a reader sees the old file or the new one. */
static int write_atomically(const char *path, const uint8_t *bytes, size_t size) {
  char tmp[4096];
  size_t done = 0;
  int r = 0, fd;
  if ((size_t)snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid()) >= sizeof tmp)
    return -ENAMETOOLONG;
  fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0)
    return -errno;
  while (done < size) {
    ssize_t n = write(fd, bytes + done, size - done);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0) {
      r = -errno;
      goto out_unlink;
    }
    done += (size_t)n;
  }
  if (fsync(fd) < 0) {
    r = -errno;
    goto out_unlink;
  }
  if (close(fd) < 0) {
    fd = -1;
    r = -errno;
    goto out_unlink;
  }
  fd = -1;
  if (rename(tmp, path) < 0) {
    r = -errno;
    goto out_unlink;
  }
  return 0;
out_unlink:
  if (fd >= 0)
    close(fd);
  unlink(tmp);
  return r;
}

int pcache__appcache_save(pcache_device *d) {
  VkPipelineCache app_cache = atomic_load(&d->appcache.cache);
  uint8_t *file = NULL;
  size_t size = 0;
  uint64_t sum;
  int r;
  if (!d->appcache.path)
    return 0;
  pthread_mutex_lock(&d->appcache.file_lock);
  if (app_cache != VK_NULL_HANDLE) {
    /* What the app built itself joins the device cache (a source needs no
     * synchronization: the app may be creating with it right now). */
    pthread_rwlock_wrlock(&d->core.cache_lock);
    (void)d->core.MergePipelineCaches(d->core.vk_device, d->core.cache, 1, &app_cache);
    pthread_rwlock_unlock(&d->core.cache_lock);
  }
  r = cache_data(d, &file, &size);
  if (r < 0)
    goto out_unlock;
  sum = pcache__checksum64(file + PCACHE__CACHE_FILE_HEADER, size);
  if (d->appcache.file_sum_known && sum == d->appcache.file_sum)
    goto out_free;
  memcpy(file, PCACHE__CACHE_FILE_MAGIC, 8);
  pcache__put_le32(file + 8, PCACHE__CACHE_FILE_VERSION);
  pcache__put_le32(file + 12, PCACHE__CACHE_FILE_HEADER);
  memcpy(file + 16, d->core.key.bytes, PCACHE_DEVKEY_SIZE);
  pcache__put_le64(file + 48, size);
  pcache__put_le64(file + 56, sum);
  r = write_atomically(d->appcache.path, file, PCACHE__CACHE_FILE_HEADER + size);
  if (r == 0) {
    d->appcache.file_sum = sum;
    d->appcache.file_sum_known = 1;
    atomic_fetch_add(&d->core.stats.cache_file_saved, 1);
  }
out_free:
  pcache__free(file);
out_unlock:
  pthread_mutex_unlock(&d->appcache.file_lock);
  return r;
}

VkPipelineCache pcache__appcache_get(pcache_device *d) {
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache cache = atomic_load(&d->appcache.cache);
  uint8_t *data = NULL;
  size_t size = 0;
  if (cache != VK_NULL_HANDLE)
    return cache;
  pthread_mutex_lock(&d->appcache.lock);
  cache = atomic_load(&d->appcache.cache);
  if (cache != VK_NULL_HANDLE)
    goto out_unlock;
  /* Seeded with what the device cache holds now; without the data, empty. */
  if (cache_data(d, &data, &size) == 0) {
    ci.initialDataSize = size;
    ci.pInitialData = data + PCACHE__CACHE_FILE_HEADER;
  }
  if (d->core.CreatePipelineCache(d->core.vk_device, &ci, d->core.allocator, &cache) != VK_SUCCESS)
    cache = VK_NULL_HANDLE;
  atomic_store(&d->appcache.cache, cache);
  pcache__free(data);
out_unlock:
  pthread_mutex_unlock(&d->appcache.lock);
  return cache;
}

void pcache__appcache_fini(pcache_device *d) {
  VkPipelineCache cache = atomic_load(&d->appcache.cache);
  if (cache != VK_NULL_HANDLE)
    d->core.DestroyPipelineCache(d->core.vk_device, cache, d->core.allocator);
  pcache__free(d->appcache.path);
}
