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
  util_app a;
  pcache_stats st;
  VkPipeline p;

  test_env_init(&env, "client-restart");
  test_daemon_start(&env, NULL);
  util_app_open(&a, 3000);
  util_build_set(a.device, &a.o, 4, 0, NULL);
  ASSERT_OK(pcache_device_flush(a.device));
  ASSERT_EQ(util_count_entries(), 4);

  test_daemon_stop(&env, SIGKILL);
  for (uint32_t i = 4; i < 8; i++) {
    test_graphics g;
    test_graphics_info(&g, &a.o, i);
    ASSERT_VK(pcache_get_graphics_pipeline(a.device, &g.info, &p));
  }
  for (uint32_t i = 0; i < 2; i++) {
    test_compute c;
    test_compute_info(&c, &a.o, i);
    ASSERT_VK(pcache_get_compute_pipeline(a.device, &c.info, &p));
  }
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.compiles, 10);
  ASSERT_EQ(st.uploaded, 4);
  ASSERT_EQ(pcache_client_connected(a.client), 0);

  test_daemon_start(&env, NULL);
  ASSERT_OK(pcache_device_flush(a.device)); /* reconnects within the timeout */
  ASSERT_OK(pcache_device_get_stats(a.device, &st));
  ASSERT_EQ(st.uploaded, 10);
  ASSERT_EQ(st.upload_queue, 0);
  ASSERT_TRUE(pcache_client_connected(a.client));
  ASSERT_EQ(util_count_entries(), 10);

  util_app_close(&a);
  test_env_cleanup(&env);
  return 0;
}
