/* The app's own caches (issue 15): cache_path keeps the device cache
 * between runs without a daemon (written at flush and destroy, only when
 * it changed, by rename); a truncated, corrupted, foreign or wrong-device
 * file is refused with its reason and ignored, and replaced at the next
 * save; a pipeline_cache handed in is read, never written; the cache
 * pcache_device_pipeline_cache hands out is never the one pcache merges
 * into, and app threads build with it while pcache's threads build and
 * merge (the TSan build runs this too). */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "client/device.h"
#include "client/appcache.h"
#include "common/bytes.h"
#include "common/hash.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

static char path[512];

static pcache_device *open_device(const test_vk *vk, VkPipelineCache app_cache) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  VkResult vr = VK_ERROR_UNKNOWN;
  info.struct_size = sizeof info;
  info.cache_path = path;
  info.pipeline_cache = app_cache;
  info.ret_vk_result = &vr;
  ASSERT_OK(pcache_device_create(NULL, &info, &device));
  ASSERT_EQ(vr, VK_SUCCESS);
  return device;
}

static void build(pcache_device *device, uint32_t first, uint32_t n) {
  test_objects o;
  test_objects_create(&o, device);
  for (uint32_t i = first; i < first + n; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, &o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  }
  test_objects_destroy(&o);
}

static size_t file_bytes(uint8_t *out, size_t max) {
  FILE *f = fopen(path, "rb");
  size_t n;
  ASSERT_TRUE(f != NULL);
  n = fread(out, 1, max, f);
  fclose(f);
  return n;
}

static void put_file(const uint8_t *bytes, size_t n) {
  FILE *f = fopen(path, "wb");
  ASSERT_TRUE(f != NULL);
  ASSERT_EQ(fwrite(bytes, 1, n, f), n);
  fclose(f);
}

/* A device on a damaged file: refused for `expect`, nothing loaded, still
 * works, and its save replaces the file with a good one. */
static void refused(const test_vk *vk, int expect) {
  pcache_device *device = open_device(vk, VK_NULL_HANDLE);
  pcache_counters c;
  ASSERT_ERR(pcache_device_cache_file_status(device), expect);
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.cache_file_loaded, 0);
  build(device, 0, 1);
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.cache_file_saved, 1);
  pcache_device_destroy(device);
  device = open_device(vk, VK_NULL_HANDLE);
  ASSERT_OK(pcache_device_cache_file_status(device));
  pcache_device_destroy(device);
}

static void cache_file(const test_vk *vk) {
  uint8_t good[1 << 16], bad[1 << 16];
  size_t n;
  pcache_counters c;
  pcache_device *device;
  struct stat st;

  /* First run: no file yet, which is no error; destroy writes it. */
  device = open_device(vk, VK_NULL_HANDLE);
  ASSERT_OK(pcache_device_cache_file_status(device));
  build(device, 0, 3);
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.cache_file_saved, 1);
  ASSERT_OK(pcache_device_flush(device)); /* unchanged: not written again */
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.cache_file_saved, 1);
  pcache_device_destroy(device);
  n = file_bytes(good, sizeof good);
  ASSERT_GT(n, PCACHE__CACHE_FILE_HEADER + 31);
  ASSERT_MEMEQ(good, PCACHE__CACHE_FILE_MAGIC, 8);
  ASSERT_EQ(pcache__le64(good + 48), n - PCACHE__CACHE_FILE_HEADER);
  ASSERT_EQ(pcache__le64(good + 56),
            pcache__checksum64(good + PCACHE__CACHE_FILE_HEADER, n - PCACHE__CACHE_FILE_HEADER));
  /* No temporary file is left beside it. */
  char tmp[600];
  snprintf(tmp, sizeof tmp, "%s.tmp.%ld", path, (long)getpid());
  ASSERT_TRUE(stat(tmp, &st) != 0);

  /* Second run: loaded, and the same pipelines leave it unchanged. */
  device = open_device(vk, VK_NULL_HANDLE);
  ASSERT_OK(pcache_device_cache_file_status(device));
  ASSERT_OK(pcache_device_get_counters(device, &c));
  ASSERT_EQ(c.cache_file_loaded, n - PCACHE__CACHE_FILE_HEADER);
  pcache_device_destroy(device);

  /* Damage of every kind the checks name. */
  memcpy(bad, good, n);
  bad[n - 1] ^= 0x40; /* the driver's data */
  put_file(bad, n);
  refused(vk, PCACHE_ECHECKSUM);
  put_file(good, n - 5); /* truncated */
  refused(vk, PCACHE_EBAD_SIZE);
  memcpy(bad, good, n);
  bad[20] ^= 1; /* the device key: another device or driver version */
  put_file(bad, n);
  refused(vk, PCACHE_EWRONG_DEVICE);
  put_file((const uint8_t *)"not a cache file at all, longer than a header ............."
                            "................",
           76);
  refused(vk, PCACHE_ECACHE_FILE);
  memcpy(bad, good, n);
  pcache__put_le32(bad + 8, 2); /* a format version this library does not know */
  put_file(bad, n);
  refused(vk, PCACHE_ECACHE_FILE);
  /* pcache's own checks pass, the driver's header does not: it still never
   * reaches the driver. */
  memcpy(bad, good, n);
  pcache__put_le32(bad + PCACHE__CACHE_FILE_HEADER + 4, 7); /* headerVersion */
  pcache__put_le64(
      bad + 56, pcache__checksum64(bad + PCACHE__CACHE_FILE_HEADER, n - PCACHE__CACHE_FILE_HEADER));
  put_file(bad, n);
  refused(vk, PCACHE_EHEADER_VERSION);
  /* Unreadable: a directory where the file should be. */
  unlink(path);
  ASSERT_OK(mkdir(path, 0700));
  device = open_device(vk, VK_NULL_HANDLE);
  ASSERT_ERR(pcache_device_cache_file_status(device), PCACHE_EBAD_SIZE);
  build(device, 0, 1);
  ASSERT_TRUE(pcache_device_flush(device) < 0); /* the rename cannot replace it */
  pcache_device_destroy(device);
  rmdir(path);
}

/* The app's own cache is read at creation and never written. */
static void given_cache(const test_vk *vk) {
  PFN_vkCreatePipelineCache create =
      (PFN_vkCreatePipelineCache)vkGetDeviceProcAddr(vk->device, "vkCreatePipelineCache");
  PFN_vkDestroyPipelineCache destroy =
      (PFN_vkDestroyPipelineCache)vkGetDeviceProcAddr(vk->device, "vkDestroyPipelineCache");
  PFN_vkGetPipelineCacheData get =
      (PFN_vkGetPipelineCacheData)vkGetDeviceProcAddr(vk->device, "vkGetPipelineCacheData");
  VkPipelineCacheCreateInfo ci = {.sType = VK_STRUCTURE_TYPE_PIPELINE_CACHE_CREATE_INFO};
  VkPipelineCache mine;
  size_t before = 0, after = 0;
  ASSERT_VK(create(vk->device, &ci, NULL, &mine));
  ASSERT_VK(get(vk->device, mine, &before, NULL));
  pcache_device *device = open_device(vk, mine);
  build(device, 10, 3);
  ASSERT_VK(get(vk->device, mine, &after, NULL));
  ASSERT_EQ(after, before);
  pcache_device_destroy(device);
  destroy(vk->device, mine, NULL);
}

typedef struct worker {
  pcache_device *device;
  const test_objects *o;
  VkDevice vk_device;
  VkPipelineCache cache; /* VK_NULL_HANDLE: through pcache */
  uint32_t first;
} worker;

static void *work(void *arg) {
  worker *w = arg;
  PFN_vkCreateGraphicsPipelines create =
      (PFN_vkCreateGraphicsPipelines)vkGetDeviceProcAddr(w->vk_device, "vkCreateGraphicsPipelines");
  PFN_vkDestroyPipeline destroy =
      (PFN_vkDestroyPipeline)vkGetDeviceProcAddr(w->vk_device, "vkDestroyPipeline");
  for (uint32_t i = w->first; i < w->first + 6; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, w->o, i);
    if (w->cache == VK_NULL_HANDLE) {
      ASSERT_VK(pcache_get_graphics_pipeline(w->device, &g.info, &p));
    } else {
      ASSERT_VK(create(w->vk_device, w->cache, 1, &g.info, NULL, &p));
      destroy(w->vk_device, p, NULL);
    }
  }
  return NULL;
}

/* The app's cache and pcache's merges never meet: two app threads build
 * through pcache_device_pipeline_cache() while two build through pcache,
 * whose compiles merge into the device cache. */
static void app_threads(const test_vk *vk) {
  pcache_device *device = open_device(vk, VK_NULL_HANDLE);
  VkPipelineCache app = pcache_device_pipeline_cache(device);
  test_objects o;
  pthread_t t[4];
  worker w[4];
  ASSERT_TRUE(app != VK_NULL_HANDLE);
  ASSERT_TRUE(app != device->core.cache); /* not the merge destination */
  ASSERT_TRUE(pcache_device_pipeline_cache(device) == app);
  test_objects_create(&o, device);
  for (int i = 0; i < 4; i++) {
    w[i] = (worker){.device = device,
                    .o = &o,
                    .vk_device = vk->device,
                    .cache = i < 2 ? app : VK_NULL_HANDLE,
                    .first = 20 + 6 * (uint32_t)i};
    ASSERT_OK(pthread_create(&t[i], NULL, work, &w[i]));
  }
  for (int i = 0; i < 4; i++)
    ASSERT_OK(pthread_join(t[i], NULL));
  ASSERT_OK(pcache_device_flush(device)); /* merges the app's cache, saves */
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

int main(void) {
  test_env env;
  test_vk vk;
  test_env_init(&env, "client-appcache");
  snprintf(path, sizeof path, "%s/app.pcache", env.root);
  test_vk_init(&vk);
  cache_file(&vk);
  given_cache(&vk);
  app_threads(&vk);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
