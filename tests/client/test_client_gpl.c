/* Graphics pipeline libraries through libpcache: the four part libraries
 * from pcache_get_graphics_pipeline, then pipelines linked from them (with
 * and without link-time optimization) the same way. All are hashable: the
 * cold run compiles and uploads each, a warm run in a new process gets
 * each from the daemon. Skipped (77) when the driver lacks
 * VK_EXT_graphics_pipeline_library. */
#include <stdio.h>
#include <string.h>

#include "client_util.h"
#include "harness.h"
#include "test.h"
#include "vk.h"

#define SKIP 77
#define PIPELINES (TEST_GPL_PARTS + 2)

/* One process's run. Returns 0 when the device has no pipeline
 * libraries. */
static int run(int warm) {
  test_vk vk;
  pcache_client *client = util_client(5000);
  pcache_device *device;
  pcache_device_info info;
  test_objects o;
  test_gpl t;
  VkPipeline libraries[TEST_GPL_PARTS], linked[2], again;
  pcache_stats st;

  if (!test_vk_init_gpl(&vk)) {
    pcache_client_close(client);
    return 0;
  }
  info = test_vk_device_info(&vk);
  ASSERT_OK(pcache_device_create(client, &info, &device));
  test_objects_create(&o, device);
  test_gpl_info(&t, &o, 0);
  for (int i = 0; i < TEST_GPL_PARTS; i++)
    ASSERT_VK(pcache_get_graphics_pipeline(device, &t.library[i], &libraries[i]));
  test_gpl_link(&t, libraries, 0);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &t.linked, &linked[0]));
  test_gpl_link(&t, libraries, VK_PIPELINE_CREATE_LINK_TIME_OPTIMIZATION_BIT_EXT);
  ASSERT_VK(pcache_get_graphics_pipeline(device, &t.linked, &linked[1]));
  ASSERT_TRUE(linked[0] != linked[1]);
  /* Asked again: the same pipeline, from the context's tiers. */
  ASSERT_VK(pcache_get_graphics_pipeline(device, &t.linked, &again));
  ASSERT_TRUE(again == linked[1]);

  ASSERT_OK(pcache_device_flush(device));
  ASSERT_OK(pcache_device_get_stats(device, &st));
  ASSERT_EQ(st.unhashable, 0);
  ASSERT_EQ(st.misses, PIPELINES);
  ASSERT_EQ(st.hits_create_info, 1);
  ASSERT_EQ(st.upload_queue, 0);
  if (warm) {
    ASSERT_EQ(st.daemon_hits, PIPELINES);
    ASSERT_EQ(st.compiles, 0);
    ASSERT_EQ(st.uploaded, 0);
  } else {
    ASSERT_EQ(st.compiles, PIPELINES);
    ASSERT_EQ(st.daemon_hits, 0);
    ASSERT_EQ(st.uploaded, PIPELINES);
  }
  test_objects_destroy(&o);
  pcache_device_destroy(device);
  pcache_client_close(client);
  test_vk_fini(&vk);
  return 1;
}

int main(int argc, char **argv) {
  test_env env;
  if (argc > 1 && strcmp(argv[1], "warm") == 0) {
    ASSERT_TRUE(run(1)); /* the parent's environment names its daemon */
    return 0;
  }
  test_env_init(&env, "client-gpl");
  test_daemon_start(&env, NULL);
  if (!run(0)) {
    fprintf(stderr, "no VK_EXT_graphics_pipeline_library: skipped\n");
    test_env_cleanup(&env);
    return SKIP;
  }
  ASSERT_EQ(util_count_entries(), PIPELINES);
  util_run_self(argv[0], "warm");
  test_env_cleanup(&env);
  return 0;
}
