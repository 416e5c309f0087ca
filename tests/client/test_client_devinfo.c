/* libpcache sends the device's deviceUUID (VkPhysicalDeviceIDProperties,
 * what vulkaninfo shows) in the DeviceInfo its uploads carry, and asks for
 * it only when the app's instance allows vkGetPhysicalDeviceProperties2
 * (Vulkan 1.1). pcachectl list shows it, "-" (JSON null) until a client
 * that could ask has uploaded, and keeps it when a later one cannot
 * (issue 15, point 3). */
#include <stdio.h>
#include <string.h>

#include "client_util.h"
#include "common/devkey.h"
#include "ctl_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

/* One device context made as an app whose instance is instance_api:
 * compiles graphics pipeline `variant` and uploads it. */
static void upload_one(const test_vk *vk, pcache_client *client, uint32_t instance_api,
                       uint32_t variant) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_device *device;
  test_objects o;
  test_graphics g;
  VkPipeline p;
  pcache_stats st;
  info.instance_api_version = instance_api;
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);
  test_graphics_info(&g, &o, variant);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 1);
  ASSERT_EQ(st.uploaded, 1);
  test_objects_destroy(&o);
  pcache_device_destroy(device);
}

int main(void) {
  test_env env;
  test_vk vk;
  pcache_client *client;
  VkPhysicalDeviceIDProperties id = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_ID_PROPERTIES};
  VkPhysicalDeviceProperties2 props2 = {.sType = VK_STRUCTURE_TYPE_PHYSICAL_DEVICE_PROPERTIES_2,
                                        .pNext = &id};
  char uuid[37], cache_uuid[37], expr[256];

  test_env_init(&env, "client-devinfo");
  ctl_start(&env);
  test_vk_init(&vk);
  ASSERT_GE(vk.api_version, VK_API_VERSION_1_1);
  ASSERT_GE(vk.props.apiVersion, VK_API_VERSION_1_1);
  vkGetPhysicalDeviceProperties2(vk.physical_device, &props2);
  pcache__uuid_format(id.deviceUUID, uuid);
  pcache__uuid_format(vk.props.pipelineCacheUUID, cache_uuid);
  client = util_client(5000);

  /* A 1.0 instance: the library may not ask, and sends none. */
  upload_one(&vk, client, VK_API_VERSION_1_0, 0);
  ctl_json_check(&env, 0, "list",
                 "len(d[\"devices\"]) == 1 and d[\"devices\"][0][\"device_uuid\"] is None");
  ASSERT_EQ(ctl_run(&env, "list"), 0);
  {
    char row[96];
    snprintf(row, sizeof row, "\n%-36s  %-36s  ", cache_uuid, "-");
    ASSERT_TRUE(strstr(ctl_out, row) != NULL);
  }

  /* The app's own instance version (1.3 on lavapipe): it is sent. */
  upload_one(&vk, client, vk.api_version, 1);
  snprintf(expr, sizeof expr,
           "d[\"devices\"][0][\"device_uuid\"] == \"%s\" and d[\"devices\"][0][\"uuid\"] == \"%s\"",
           uuid, cache_uuid);
  ctl_json_check(&env, 0, "list", expr);
  ASSERT_EQ(ctl_run(&env, "list"), 0);
  {
    char row[96];
    snprintf(row, sizeof row, "\n%-36s  %-36s  ", cache_uuid, uuid);
    ASSERT_TRUE(strstr(ctl_out, row) != NULL);
  }

  /* A 1.0 app afterwards leaves the known UUID in place. */
  upload_one(&vk, client, VK_API_VERSION_1_0, 2);
  ctl_json_check(&env, 0, "list", expr);

  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  printf("ok\n");
  return 0;
}
