/* No daemon at all: everything works locally and no call waits longer
 * than the timeout. Then PCACHE_DISABLE=1: nothing is even queued. */
#include <errno.h>
#include <stdlib.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define TIMEOUT_MS 100
#define SLACK_MS 250 /* a loaded 2-core CI machine, lavapipe compiling */

static void run(const test_vk *vk, int disabled) {
  pcache_device_info info = test_vk_device_info(vk);
  pcache_client *client;
  pcache_device *device;
  test_objects o;
  pcache_stats st;
  uint64_t t0;

  t0 = util_now_ms();
  client = util_client(TIMEOUT_MS);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  ASSERT_EQ(pcache_client_connected(client), 0);
  ASSERT_STREQ(pcache_client_app_name(client), "pcache-client-test");
  t0 = util_now_ms();
  ASSERT_OK(pcache_device_create(client, &info, &device));
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  test_objects_create(&o, device);
  for (uint32_t i = 0; i < 4; i++) {
    test_graphics g;
    VkPipeline p;
    test_graphics_info(&g, &o, i);
    t0 = util_now_ms();
    ASSERT_VK(pcache_get_graphics_pipeline(device, &g.info, &p));
    ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  }
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.compiles, 4);
  ASSERT_EQ(st.daemon_hits, 0);
  ASSERT_EQ(st.prefetched, 0);
  ASSERT_EQ(st.uploaded, 0);
  t0 = util_now_ms();
  if (disabled) {
    ASSERT_EQ(st.upload_queue, 0);
    ASSERT_OK(pcache_device_flush(device));
  } else {
    ASSERT_EQ(st.upload_queue, 4); /* kept for when the daemon comes */
    ASSERT_ERR(pcache_device_flush(device), -ETIMEDOUT);
  }
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  test_objects_destroy(&o);
  t0 = util_now_ms();
  pcache_device_destroy(device);
  ASSERT_LT(util_now_ms() - t0, TIMEOUT_MS + SLACK_MS);
  ASSERT_EQ(pcache_client_connected(client), 0);
  pcache_client_close(client);
}

int main(void) {
  test_env env;
  test_vk vk;
  test_env_init(&env, "client-no-daemon");
  test_vk_init(&vk);
  run(&vk, 0);
  setenv("PCACHE_DISABLE", "1", 1);
  run(&vk, 1);
  /* NULL client: local only as well. */
  {
    pcache_device_info info = test_vk_device_info(&vk);
    pcache_device *device;
    ASSERT_OK(pcache_device_create(NULL, &info, &device));
    ASSERT_OK(pcache_device_flush(device));
    pcache_device_destroy(device);
  }
  pcache_device_destroy(NULL);
  pcache_client_close(NULL);
  test_vk_fini(&vk);
  test_env_cleanup(&env);
  return 0;
}
