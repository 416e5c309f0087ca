/* Pass-through (issue 15): with PCACHE_PASSTHROUGH=1 or info.passthrough,
 * every pipeline call goes to the driver alone: nothing is compiled through
 * pcache's caches, uploaded, saved or asked of the daemon, identical state
 * gets a new pipeline each time. The same app code, written for
 * PCACHE_PIPELINES_APP (it destroys each pipeline with vkDestroyPipeline),
 * runs unchanged with pcache on and off: ASan sees no double destroy and
 * no leak either way. With shared ownership, pass-through still owns what
 * it made, so that app code works unchanged too. */
#include <stdlib.h>
#include <sys/stat.h>

#include "client/device.h"
#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define H(p) ((long long)(uintptr_t)(p))

static char path[512];

/* The app's code, the same in every run: a batch, two gets of one state,
 * everything destroyed with vkDestroyPipeline. */
static void app_code(const test_vk *vk, pcache_device *device, VkPipeline ret[4]) {
  PFN_vkDestroyPipeline destroy =
      (PFN_vkDestroyPipeline)vkGetDeviceProcAddr(vk->device, "vkDestroyPipeline");
  test_objects o;
  test_graphics g[2];
  VkGraphicsPipelineCreateInfo infos[2];
  test_objects_create(&o, device);
  for (uint32_t i = 0; i < 2; i++) {
    test_graphics_info(&g[i], &o, i);
    infos[i] = g[i].info;
  }
  infos[0].flags = VK_PIPELINE_CREATE_ALLOW_DERIVATIVES_BIT;
  infos[1].flags = VK_PIPELINE_CREATE_DERIVATIVE_BIT;
  infos[1].basePipelineIndex = 0;
  ASSERT_VK(pcache_create_graphics_pipelines(device, 2, infos, ret));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g[0].info, &ret[2]));
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g[0].info, &ret[3]));
  ASSERT_NE(H(ret[2]), H(ret[3])); /* app ownership: one per call */
  for (int i = 0; i < 4; i++)
    destroy(vk->device, ret[i], NULL);
  test_objects_destroy(&o);
}

static pcache_device *open_device(const test_vk *vk, pcache_client *client, int passthrough,
                                  uint32_t ownership) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  info.struct_size = sizeof info;
  info.passthrough = passthrough;
  info.pipeline_ownership = ownership;
  info.cache_path = path;
  ASSERT_OK(pcache_device_create(client, &info, &device));
  return device;
}

int main(void) {
  test_env env;
  test_vk vk;
  pcache_client *client;
  pcache_device *device;
  pcache_stats st;
  VkPipeline p[4];
  struct stat sb;

  test_env_init(&env, "client-passthrough");
  snprintf(path, sizeof path, "%s/app.pcache", env.root);
  test_daemon_start(&env, NULL);
  test_vk_init(&vk);
  client = util_client(5000);

  /* Off, by the environment: the daemon and the file see nothing. */
  setenv("PCACHE_PASSTHROUGH", "1", 1);
  device = open_device(&vk, client, 0, PCACHE_PIPELINES_APP);
  app_code(&vk, device, p);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 0); /* pcache compiled nothing itself */
  ASSERT_EQ(st.misses, 4);
  ASSERT_EQ(st.upload_queue, 0);
  ASSERT_EQ(st.prefetched, 0);
  ASSERT_TRUE(pcache_device_pipeline_cache(device) == VK_NULL_HANDLE); /* none was given */
  ASSERT_OK(pcache_device_flush(device));
  pcache_device_destroy(device);
  unsetenv("PCACHE_PASSTHROUGH");
  ASSERT_EQ(util_count_entries(), 0);
  ASSERT_TRUE(stat(path, &sb) != 0);

  /* On: the same code, now cached, uploaded and saved. */
  device = open_device(&vk, client, 0, PCACHE_PIPELINES_APP);
  app_code(&vk, device, p);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 3); /* g0 with ALLOW_DERIVATIVES, g1, g0 */
  ASSERT_OK(pcache_device_flush(device));
  pcache_device_destroy(device);
  ASSERT_EQ(util_count_entries(), 3);
  ASSERT_OK(stat(path, &sb));

  /* Off by the field, shared ownership: the context still owns (and
   * destroys) what it made, and release works, as with pcache on. */
  device = open_device(&vk, client, 1, PCACHE_PIPELINES_SHARED);
  {
    test_objects o;
    test_graphics g;
    VkPipeline a, b;
    test_objects_create(&o, device);
    test_graphics_info(&g, &o, 5);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &a));
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &b));
    ASSERT_NE(H(a), H(b)); /* no cache behind it: a new one each time */
    ASSERT_OK(pcache_release_pipeline(device, a));
    ASSERT_ERR(pcache_release_pipeline(device, a), PCACHE_ENOT_FOUND);
    ASSERT_OK(pcache_device_get_stats(device, &st));
    ASSERT_EQ(st.pipelines, 1);
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.unhashable, 0); /* nothing is described at all */
    /* The wrappers recorded nothing. */
    ASSERT_TRUE(pcache__objmap_module(device->core.objects, o.vert) == NULL);
    test_objects_destroy(&o);
  }
  pcache_device_destroy(device); /* destroys b */
  ASSERT_EQ(util_count_entries(), 3);

  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
