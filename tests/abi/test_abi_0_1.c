/* A consumer compiled against the frozen 0.1 header (tests/abi/include-0.1,
 * first on this target's include path) and linked to the current
 * libpcache.so: the growable structs keep it working whatever fields the
 * library has gained since. Also the rules themselves: struct_size 0 reads
 * the first version, a size below it is refused, bytes past the caller's
 * size are never read or written (heap buffers of exactly that size, which
 * ASan builds check), and a larger, newer caller's extra fields are left
 * alone. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <pcache/pcache.h>

#include "harness.h"
#include "test.h"
#include "vk.h"

#define V1_OPTIONS_SIZE (offsetof(pcache_client_options, disable_daemon) + sizeof(int))
#define V1_INFO_SIZE (offsetof(pcache_device_info, no_prefetch) + sizeof(int))
#define V1_STATS_SIZE (offsetof(pcache_stats, snapshots_uploaded) + sizeof(uint64_t))

static pcache_device_info *info_of(const test_vk *vk, size_t size) {
  pcache_device_info *info = calloc(1, size);
  pcache_device_info v = {.struct_size = size,
                          .instance = vk->instance,
                          .physical_device = vk->physical_device,
                          .device = vk->device,
                          .get_instance_proc_addr = vkGetInstanceProcAddr,
                          .creation_feedback = vk->creation_feedback};
  ASSERT_TRUE(info);
  memcpy(info, &v, size < sizeof v ? size : sizeof v);
  return info;
}

int main(void) {
  test_env env;
  test_vk vk;
  test_env_init(&env, "abi_0_1");
  test_daemon_start(&env, NULL);
  test_vk_init(&vk);

  /* Options exactly as large as the caller's struct, on the heap. */
  pcache_client_options *opts = calloc(1, V1_OPTIONS_SIZE);
  ASSERT_TRUE(opts);
  opts->struct_size = V1_OPTIONS_SIZE;
  opts->app_name = "abi-0.1";
  opts->timeout_ms = 2000;
  pcache_client *client;
  ASSERT_OK(pcache_client_open(opts, &client));
  ASSERT_STREQ(pcache_client_app_name(client), "abi-0.1");
  /* Zero means the first version; smaller than it is refused. */
  pcache_client *other;
  opts->struct_size = 0;
  ASSERT_OK(pcache_client_open(opts, &other));
  pcache_client_close(other);
  opts->struct_size = V1_OPTIONS_SIZE - 1;
  ASSERT_ERR(pcache_client_open(opts, &other), -EINVAL);
  free(opts);

  pcache_device_info *info = info_of(&vk, V1_INFO_SIZE);
  pcache_device *device;
  ASSERT_OK(pcache_device_create(client, info, &device));
  info->struct_size = 8;
  pcache_device *refused;
  ASSERT_ERR(pcache_device_create(client, info, &refused), -EINVAL);
  free(info);

  test_objects o;
  test_objects_create(&o, device);
  for (uint32_t i = 0; i < 3; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, &o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  }

  /* The header's macro passes this header's size. */
  pcache_stats st;
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.pipelines, 3);
  ASSERT_EQ(st.compiles, 3);
  /* A caller of the first version: exactly that many bytes. */
  pcache_stats *old = malloc(V1_STATS_SIZE);
  ASSERT_TRUE(old);
  ASSERT_OK(pcache_device_get_stats_sized(device, old, V1_STATS_SIZE));
  ASSERT_EQ(old->pipelines, 3);
  free(old);
  /* The exported function (what dlsym finds) fills the first version. */
  ASSERT_OK((pcache_device_get_stats)(device, &st));
  ASSERT_EQ(st.pipelines, 3);
  ASSERT_ERR(pcache_device_get_stats_sized(device, &st, V1_STATS_SIZE - 8), -EINVAL);
  /* A newer caller knows fields this library lacks: they stay as set. */
  size_t newer = sizeof(pcache_stats) + 64;
  unsigned char *buf = malloc(newer);
  ASSERT_TRUE(buf);
  memset(buf, 0xa5, newer);
  ASSERT_OK(pcache_device_get_stats_sized(device, (pcache_stats *)buf, newer));
  for (size_t i = sizeof(pcache_stats); i < newer; i++)
    ASSERT_EQ(buf[i], 0xa5);
  free(buf);

  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
