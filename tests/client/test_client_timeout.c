/* A daemon stopped with SIGSTOP (connected, never answering): every call
 * returns within the timeout plus a small slack, and the app goes on. */
#include <errno.h>
#include <signal.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define TIMEOUT_MS 100
#define SLACK_MS 250

int main(void) {
  test_env env;
  test_vk vk;
  pcache_device_info info;
  pcache_client *client;
  pcache_device *device, *device2;
  test_objects o;
  pcache_stats st;
  VkPipeline p;
  uint64_t t0;

  test_env_init(&env, "client-timeout");
  test_daemon_start(&env, NULL);
  test_vk_init(&vk);
  info = test_vk_device_info(&vk);
  client = util_client(TIMEOUT_MS);
  ASSERT_TRUE(pcache_client_connected(client));
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);

  test_daemon_pause(&env);
  for (uint32_t i = 0; i < 3; i++) {
    test_graphics g;
    test_graphics_info(&g, &o, i);
    t0 = util_now_ms();
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
    ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  }
  ASSERT_EQ(pcache_client_connected(client), 0);
  t0 = util_now_ms();
  ASSERT_ERR(pcache_device_flush(device), -ETIMEDOUT);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  /* A new device context: its prefetch gives up in time too. */
  t0 = util_now_ms();
  ASSERT_OK(pcache_device_create(client, &info, &device2));
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  t0 = util_now_ms();
  pcache_device_destroy(device2);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 3);
  ASSERT_EQ(st.daemon_hits, 0);

  /* Woken up, the daemon gets what was queued. */
  kill(env.daemon_pid, SIGCONT);
  for (int i = 0; i < 50 && pcache_device_flush(device) != 0; i++)
    ;
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.uploaded, 3);

  test_objects_destroy(&o);
  t0 = util_now_ms();
  pcache_device_destroy(device);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
