/* leak_canary.c - proves that the ASan run still fails on a leak in pcache's
 * own code while the driver's leaks are suppressed by module.
 *
 * It loads the real driver and builds a pipeline through libpcache, exactly
 * as the Vulkan tests do (so the driver's modules are kept mapped and
 * scripts/lsan.supp is in force), then deliberately never closes a
 * pcache_client. tests/sanitize/expect_leak.sh runs it and passes only when
 * LeakSanitizer reports that allocation, with pcache_client_open in its
 * stack. Built only in AddressSanitizer builds; never installed. */
#include "test.h"
#include "vk.h"

#include "harness.h"

/* Not static and not inlined: its frame must appear in the report. */
void leak_canary_forget_client(void);

__attribute__((noinline)) void leak_canary_forget_client(void) {
  pcache_client_options opts = {.disable_daemon = 1, .app_name = "leak-canary"};
  pcache_client *client = NULL;
  ASSERT_OK(pcache_client_open(&opts, &client));
  /* The one deliberate leak: the only pointer to the client dies here. */
  client = NULL;
}

int main(void) {
  test_env env;
  test_env_init(&env, "leak_canary");
  test_vk vk;
  test_vk_init(&vk);

  pcache_client_options opts = {.disable_daemon = 1, .app_name = "leak-canary"};
  pcache_client *client;
  ASSERT_OK(pcache_client_open(&opts, &client));
  pcache_device_info info = test_vk_device_info(&vk);
  pcache_device *device;
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects objects;
  test_objects_create(&objects, device);
  test_compute comp;
  test_compute_info(&comp, &objects, 1);
  VkPipeline pipeline;
  ASSERT_VK(pcache_get_compute_pipeline(device, &comp.info, &pipeline));
  test_objects_destroy(&objects);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  test_env_cleanup(&env);

  leak_canary_forget_client();
  printf("leak_canary: exiting with one pcache_client leaked on purpose\n");
  return 0;
}
