/* The daemon is killed in the middle of a run and started again: the app
 * never fails, and what it compiled meanwhile is uploaded after the
 * restart. */
#include <signal.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

int main(void) {
  test_env env;
  test_vk vk;
  pcache_device_info info;
  pcache_client *client;
  pcache_device *device;
  test_objects o;
  pcache_stats st;
  VkPipeline p;

  test_env_init(&env, "client-restart");
  test_daemon_start(&env, NULL);
  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
  client = util_client(3000);
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);
  for (uint32_t i = 0; i < 4; i++) {
    test_graphics g;
    test_graphics_info(&g, &o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  }
  ASSERT_OK(pcache_device_flush(device));
  ASSERT_EQ(util_count_entries(), 4);

  test_daemon_stop(&env, SIGKILL);
  for (uint32_t i = 4; i < 8; i++) {
    test_graphics g;
    test_graphics_info(&g, &o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
  }
  for (uint32_t i = 0; i < 2; i++) {
    test_compute c;
    test_compute_info(&c, &o, i);
    ASSERT_VK(pcache_get_compute_pipeline(device, &c.info, &p));
  }
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 10);
  ASSERT_EQ(st.uploaded, 4);
  ASSERT_EQ(pcache_client_connected(client), 0);

  test_daemon_start(&env, NULL);
  ASSERT_OK(pcache_device_flush(device)); /* reconnects within the timeout */
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.uploaded, 10);
  ASSERT_EQ(st.upload_queue, 0);
  ASSERT_TRUE(pcache_client_connected(client));
  ASSERT_EQ(util_count_entries(), 10);

  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
